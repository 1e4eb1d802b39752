"""Reading a source's records for staging, where one that cannot be read becomes a ``Failure``: a JSONL
line (``staging._read_jsonl``), a PDF file that cannot be read (the folder's other files go on)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa

from flows.ingestion.ledger import Failure, absolute
from operators.base import Source
from operators.sources._common import record_problem


def _read_split(op: Source, split: Any, skip: frozenset[str]) -> Iterator[pa.Table | Failure]:
    """One split's tables; for PDFs (a split a file), an unreadable file is a ``Failure`` and the rest goes on."""
    if op.name != "sources.pdf" or split is None:
        yield from op.read(split)
        return
    path = absolute(str(split))
    if f"read:{path}" in skip:  # recorded by a finished shard: it enters the index by a retry
        yield Failure(id=f"read:{path}", stage="read", path=path, error="recorded as unreadable by a finished shard")
        return
    got = read_file(op, split)
    if isinstance(got, str):
        yield Failure(id=f"read:{path}", stage="read", path=path, error=got)
        return
    yield from got


def read_file(op: Source, path: Any) -> list[pa.Table] | str:
    """A file's tables, read whole by the source ``op`` (its split), or why it cannot be read (a broken PDF):
    staging and ``--retry-failed`` read an unreadable file's failure so."""
    from operators.errors import SourceError

    try:
        return list(op.read(path))
    except SourceError as err:
        return str(err)


def _skipped_lines(skip: frozenset[str], where: str) -> set[int]:
    """The lines of the file ``where`` (absolute) among the ``skip`` ids ``read:<path>:<line>``; a relative path
    (a ledger written before paths were absolute) names the file when it is the end of ``where``."""
    lines, ours = set(), Path(where).parts
    for failure_id in skip:
        kind, _, rest = failure_id.partition(":")
        path, _, line = rest.rpartition(":")
        if kind != "read" or not line.isdigit():
            continue
        tail = tuple(p for p in Path(path).parts if p not in (".", ".."))
        if path == where or (not Path(path).is_absolute() and tail and ours[-len(tail):] == tail):
            lines.add(int(line))
    return lines


def _parse(raw: bytes, text_field: str, title_field: str = "title") -> tuple[dict | None, str | None]:
    """A JSONL line as a record, or the reason it is not one."""
    try:
        record = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return None, f"not valid JSON ({err})"
    if not isinstance(record, dict):
        return None, f"a JSON {type(record).__name__}, not an object"
    if (problem := record_problem(record, text_field, title_field)) is not None:  # no text field, or nothing in it
        return None, problem
    return record, None
