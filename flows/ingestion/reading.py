"""Reading a source's documents for staging: in the order its files were first staged, with each unreadable record
as a ``Failure`` (``flows.ingestion.records``) and each repeated id as one (``flows.ingestion.duplicates``)."""

from __future__ import annotations

import logging
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


def log_failure(failure: Failure, logged: int, skip: frozenset[str], said: set[str]) -> int:
    """Log an unreadable record (the first ``LOGGED_FAILURES`` of a run) with its file and line, unless ``said``
    (the ids logged before in the run) has it; 1 if it is new (not one a finished shard recorded), else 0."""
    if failure.id in skip:
        return 0
    if logged < LOGGED_FAILURES and failure.id not in said:
        log.warning("left out: %s", failure.described())
    said.add(failure.id)
    return 1


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
