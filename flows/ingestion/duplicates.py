"""Document ids that repeat within one source.

A shard's docnos must be unique, and a docno may be live once in an index, so a source that yields an
id twice cannot be ingested as it is. While a source is staged (``staging.iter_documents``), the ids seen
so far are kept, across its shards; a later copy of an id becomes a read failure in the ledger
(``duplicate id d2, first at /data/corpus.jsonl:2``) and the rest of the source is ingested. For a JSONL or
CSV source the failure is the copy's line (``read:<file>:<line>``, a CSV row's first line, so ``--retry-failed``
reads it again once its id is fixed); for other sources it is the copy's row, named by its file and row for
Parquet (``/data/b.parquet row 4``), else by its place among the source's documents.

With ``replace`` (``tessera ingest --replace``) the last copy wins instead: every copy is staged, a shard
keeps the last copy of an id (``last_copies``, when it is prepared), and a later shard's commit replaces
an earlier shard's copy (commits go in shard order then, on Ray too).
"""

from __future__ import annotations

import json
from typing import Callable, Iterator

import pyarrow as pa

from flows.ingestion.ledger import Failure
from operators.ids import content_doc_id

#: (file number in ``SeenIds.file``, 1-based line or row), or (-1, 1-based document number in the source).
Place = tuple[int, int]


class SeenIds:
    """The ids a source yielded so far, each with where it was first."""

    def __init__(self) -> None:
        self.first: dict[str, Place] = {}
        self._prefixes: list[str] = []  # each file's place before its line or row: "/data/a.csv:"
        self._numbers: dict[str, int] = {}
        self.documents = 0  # documents of a source without lines, for their places

    def file(self, path: str, rows: bool = False) -> int:
        """The number of the file ``path`` (its batches ask again); ``rows``: its places are rows
        (Parquet), not lines."""
        if path not in self._numbers:
            self._numbers[path] = len(self._prefixes)
            self._prefixes.append(f"{path} row " if rows else f"{path}:")
        return self._numbers[path]

    def describe(self, place: Place) -> str:
        number, n = place
        return f"{self._prefixes[number]}{n}" if number >= 0 else f"document {n} of the source"

    def split(self, table: pa.Table, place: Callable[[int], Place],
              failure: Callable[[int, str, str], Failure]) -> Iterator[pa.Table | Failure]:
        """``table`` in order, with each row whose id was seen before replaced by ``failure(row, id, first)``."""
        ids = table.column("docno").to_pylist()
        start = 0
        for i, doc_id in enumerate(ids):
            first = self.first.get(doc_id)
            if first is None:
                self.first[doc_id] = place(i)
                continue
            if i > start:
                yield table.slice(start, i - start)
            yield failure(i, doc_id, self.describe(first))
            start = i + 1
        if start == 0:
            yield table
        elif start < len(ids):
            yield table.slice(start)

    def split_rows(self, table: pa.Table) -> Iterator[pa.Table | Failure]:
        """``split`` for a source without lines (Parquet, CSV, PDF ...): a repeated id fails with its row."""
        offset = self.documents
        self.documents += table.num_rows

        def failure(i: int, doc_id: str, first: str) -> Failure:
            return self.row_failure(table, i, doc_id, first, f"document {offset + i + 1} of the source",
                                    number=offset + i + 1)

        yield from self.split(table, lambda i: (-1, offset + i + 1), failure)

    def row_failure(self, table: pa.Table, i: int, doc_id: str, first: str, where: str,
                    number: int | str | None = None) -> Failure:
        """The failure of row ``i`` of ``table``, a copy of ``doc_id`` (first at ``first``) at ``where``, with its
        row as ``record`` (a retry ingests it from there). ``number``: what tells the copy's failure id apart from
        other copies' (``where`` itself by default)."""
        record = json.loads(json.dumps(table.slice(i, 1).to_pylist()[0], default=str))
        return Failure(id=f"dup:{doc_id}:{where if number is None else number}", stage="read", doc_id=doc_id,
                       record=record, error=f"duplicate id {doc_id} ({where}), first at {first}"
                       + content_id_note(table, i, doc_id))


def duplicate_error(doc_id: str, first: str, note: str = "") -> str:
    return f"duplicate id {doc_id}, first at {first}{note}"


def content_id_note(table: pa.Table, row: int, doc_id: str) -> str:
    """What to add to a repeated id that is the row's content id (a record without an id): its documents may differ
    after their first 100 characters, and only ids of their own keep them apart."""
    def value(name: str) -> str | None:
        return table.column(name)[row].as_py() if name in table.column_names else None

    if doc_id != content_doc_id(value("title"), value("text")):
        return ""
    return ("; it is a content id (the record has no id: the md5 of its title and the first 100 characters of its "
            "text), so two records that open alike share it; give the records ids (_id)")


def last_copies(docs: pa.Table) -> pa.Table:
    """``docs`` with only the last copy of each docno (a shard staged with ``replace`` may hold two)."""
    if "docno" not in docs.column_names or docs.num_rows < 2:
        return docs
    ids = docs.column("docno").to_pylist()
    if len(set(ids)) == len(ids):
        return docs
    last = {doc_id: i for i, doc_id in enumerate(ids)}
    return docs.take(pa.array(sorted(last.values()), pa.int64()))
