"""Reading a source's documents for staging: in the order its files were first staged, with each unreadable record
as a ``Failure`` (``flows.ingestion.records``) and each repeated id as one (``flows.ingestion.duplicates``)."""

from __future__ import annotations

import logging
import re
from typing import Callable, Iterator

import pyarrow as pa

from flows.ingestion.duplicates import SeenIds
from flows.ingestion.file_order import in_order
from flows.ingestion.ledger import Failure
from flows.ingestion.records import jsonl_plan, read_jsonl, read_split
from operators.base import Source

log = logging.getLogger("tessera.ingest")

#: Unreadable records logged one by one while staging; the rest are counted in one line.
LOGGED_FAILURES = 10


def iter_documents(op: Source, skip: frozenset[str] = frozenset(), duplicates: bool = False,
                   order: list[str] | None = None, notes: dict[str, list[str]] | None = None
                   ) -> Iterator[pa.Table | Failure]:
    """The source's documents in order, as tables, with ``Failure``s where a record is unreadable
    (or is one of the ``skip`` failure ids, lines recorded as unreadable by finished shards) or repeats an
    id met before (unless ``duplicates``: every copy is a document then, see ``flows.ingestion.duplicates``).
    ``order``: the absolute paths of its files in the order to read them (``file_order.files_read_order``).
    ``notes``: where the warnings of a file's documents are held (``Source.held_notes``, logged by ``log_notes``
    for those ingested), not logged as they are read."""
    op.ensure_setup()
    seen = None if duplicates else SeenIds()
    jsonl = jsonl_plan(op)
    op.held_notes = notes
    try:
        if jsonl is None:
            for split in in_order(op.splits(), order):
                yield from read_split(op, split, skip, seen)
            return
        paths, params, text_field = jsonl
        yield from read_jsonl(op, in_order(paths, order), params, text_field, skip, seen)
    finally:
        op.held_notes = None


def check_source(op: Source) -> None:
    """Fail now, naming the path or param, when the read step cannot be read (a missing file, a BEIR part that
    is not the corpus), so no index is created for a source that is not there."""
    op.ensure_setup()
    jsonl_plan(op)
    op.splits()


class ReadCount:
    """``on_docs`` (may be None), told of each document read once, though a sync reads the source again."""

    def __init__(self, on_docs: Callable[[int], None] | None):
        self.on_docs, self.count, self.told = on_docs, 0, 0

    def restart(self) -> None:
        self.count = 0

    def __call__(self, n: int) -> None:
        self.count += n
        if self.count > self.told and self.on_docs is not None:
            self.on_docs(self.count - self.told)
        self.told = max(self.told, self.count)


class Said(set):
    """What a run logged, said once though a sync reads the source again: messages and failure ids; and what is said
    in one line at the end (``log_rest``): the unreadable records past the first lines, each file's repeated ids."""

    def __init__(self) -> None:
        super().__init__()
        self.lines, self.unlogged = 0, 0
        self.repeats: dict[str, list[Failure]] = {}


def log_failure(failure: Failure, logged: int, skip: frozenset[str], said: Said) -> int:
    """Log an unreadable record (the first ``LOGGED_FAILURES`` of a run) with its file and line, unless ``said``
    (the ids logged before in the run) has it; a repeated id is kept for its file's one line (50 copies were 50
    lines). 1 if it is new (not one a finished shard recorded), else 0."""
    if failure.id in skip:
        return 0
    if failure.id not in said and failure.error.startswith("duplicate id "):
        said.repeats.setdefault(failure.path or "the source", []).append(failure)
    elif failure.id not in said and said.lines < LOGGED_FAILURES:
        log.warning("left out: %s", failure.described())
        said.lines += 1
    elif failure.id not in said:
        said.unlogged += 1
    said.add(failure.id)
    return 1


def log_rest(said: Said) -> None:
    """After the source is read: how many unreadable records got no line, and one line per file of its repeated
    ids, with the first few (each copy is in ``failures.jsonl`` with its file and line)."""
    if said.unlogged:
        log.warning("... and %d more", said.unlogged)
    for path, copies in said.repeats.items():
        shown = ", ".join(_repeated_id(f) + (f" at line {f.line}" if f.line else "") for f in copies[:3])
        log.warning("left out: %s repeats %d id(s) of documents before them (%s%s): the first copy of each is "
                    "kept", path, len(copies), shown, ", ..." if len(copies) > 3 else "")
    said.unlogged, said.repeats = 0, {}


def _repeated_id(failure: Failure) -> str:
    """The id a copy repeats: its ``doc_id``, or for a line (which has none) the id its error names."""
    found = re.match(r"duplicate id (.*?)(?: \([^()]*\))?, first at ", failure.error)
    return failure.doc_id or (found.group(1) if found else "?")


def log_notes(notes: dict[str, list[str]], documents: pa.Table, said: set[str]) -> None:
    """Log the warnings ``notes`` holds of the files whose ``documents`` are staged now, unless ``said`` (those
    logged before in the run: a sync reads the source again): a file whose documents a finished shard holds, read
    again only to compare them, is not warned of again at each ingest."""
    if not notes or "path" not in documents.column_names:
        return
    for path in dict.fromkeys(documents.column("path").to_pylist()):
        for message in notes.get(path, ()):
            if message not in said:
                log.warning("%s", message)
                said.add(message)
