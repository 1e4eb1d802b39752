"""A new user's own messy files through ``tessera ingest`` (in-process, BM25 only, real files in tmp_path): what
the first attempt at a corpus tends to hold, and what each case must give."""

from __future__ import annotations

import json

from flows.ingestion import ingest
from operators.store import Index

BM25_ONLY = {"dense": False}


def write_jsonl(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def rows_by_doc(index_path) -> dict[str, dict]:
    index = Index.open(index_path)
    names = index.column_names()
    _, table = index.columns(names)
    return {row["doc_id"]: row for row in table.to_pylist()}


def test_a_jsonl_title_and_fields_missing_from_the_first_record_are_kept(tmp_path):
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, [{"_id": "a", "text": "apples are red"},
                       {"_id": "b", "title": "Banana split recipe", "text": "yellow fruit", "year": 2001}])
    ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    rows = rows_by_doc(tmp_path / "idx")
    assert (rows["b"]["title"], rows["b"]["year"]) == ("Banana split recipe", 2001)
    assert (rows["a"]["title"], rows["a"]["year"]) in (("", None), (None, None))
    assert Index.open(tmp_path / "idx").search_bm25(["banana recipe"], k=1)[0].docnos == ["b"]
