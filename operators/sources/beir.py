"""BEIR folder source: the corpus or the queries of a benchmark set."""

from __future__ import annotations

from typing import Iterator, Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Source
from operators.local_files import local_path
from operators.sources._beir_files import beir_file, load_qrels
from operators.sources._common import DocumentParams, FileRange, file_ranges, read_jsonl_documents, rebatch


class BeirSource(Source):
    """Read a BEIR folder: the corpus as documents, or the queries of one qrels split.

    ``part="corpus"`` emits ``docno, title, text`` (+ metadata fields) from
    ``corpus.jsonl``, cut into byte ranges for parallel reads (``num_splits``);
    ``part="queries"`` emits ``qid, query`` from ``queries.jsonl``, keeping only the
    queries judged in ``qrels/<split>.tsv`` (``split=None`` keeps them all).

    Usage::

        BeirSource({"folder": "../shared/data/scifact", "part": "queries"})(pa.table({}))
        # 300 rows: qid, query
    """

    name = "sources.beir"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        folder: str = Field(..., min_length=1, json_schema_extra=local_path(),
                            description="BEIR folder holding corpus.jsonl, queries.jsonl, qrels/.")
        part: Literal["corpus", "queries"] = Field("corpus", description="Emit the documents or the queries.")
        split: str | None = Field(
            "test", description="Queries: keep those judged in qrels/<split>.tsv; None keeps every query. "
            "Ignored for the corpus."
        )
        fields: list[str] | None = Field(
            None, description="Metadata fields to keep as columns; None keeps those of any record, [] none."
        )
        limit: int | None = Field(None, gt=0, description="Emit only the first N rows (read as one split).")
        num_splits: int = Field(1, ge=1, description="Corpus: newline-aligned byte ranges to read in parallel.")
        on_error: Literal["raise", "skip"] = Field(
            "raise", description="A bad line: `raise` an error naming file and line, or `skip` it and log the count."
        )
        batch_rows: int = Field(10_000, gt=0, description="Most rows in one emitted table.")

    def produces(self) -> dict[str, str]:
        if self.params.part == "queries":
            return {"qid": "id", "query": "text"}
        return {"docno": "id", "text": "text"}

    def splits(self) -> list[FileRange | None]:
        p = self.params
        path = beir_file(p.folder, p.part, op=self)
        if p.part == "queries" or p.limit is not None:
            return [None]
        return file_ranges([path], p.num_splits)

    def read(self, split: FileRange | None) -> Iterator[pa.Table]:
        p = self.params
        ranges = [split] if split is not None else [FileRange(str(beir_file(p.folder, p.part, op=self)))]
        if p.part == "corpus":
            params = DocumentParams(fields=p.fields, limit=p.limit, batch_rows=p.batch_rows)
            yield from read_jsonl_documents(self, ranges, params, on_error=p.on_error)
            return
        wanted = None
        if p.split is not None:
            wanted = pc.unique(load_qrels(p.folder, p.split, op=self).column("qid"))
        params = DocumentParams(fields=p.fields, batch_rows=p.batch_rows)
        yield from rebatch((self._queries(t, wanted) for t in read_jsonl_documents(
            self, ranges, params, on_error=p.on_error)), p.batch_rows, p.limit)

    @staticmethod
    def _queries(docs: pa.Table, wanted: pa.Array | None) -> pa.Table:
        if wanted is not None:
            docs = docs.filter(pc.is_in(docs.column("docno"), value_set=wanted))
        if "title" in docs.column_names:
            docs = docs.drop_columns(["title"])
        names = {"docno": "qid", "text": "query"}
        return docs.rename_columns([names.get(n, n) for n in docs.column_names])
