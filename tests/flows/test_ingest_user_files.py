"""A new user's own files through ``tessera ingest`` (in-process, BM25 only, real files in tmp_path): encodings other
than UTF-8, Markdown front matter, id fields beside ``_id``, texts that are not strings, and ``--replace``'s counts."""

from __future__ import annotations

import json

from flows.ingestion import ingest
from operators.store import Index

BM25_ONLY = {"dense": False}


def write_jsonl(path, records) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def rows_by_doc(index_path) -> dict[str, dict]:
    index = Index.open(index_path)
    _, table = index.columns(index.column_names())
    return {row["doc_id"]: row for row in table.to_pylist()}


def test_replace_counts_each_document_once_not_each_copy(tmp_path):
    """'4 docs -> 2 chunks' for a file of two ids written twice: the summary counted the copies a later one replaced
    (within a shard, and across shards: '4 docs -> 4 chunks in 4 shard(s)' for an index of 2 documents; chunks are
    those written, an earlier copy's too)."""
    path = tmp_path / "docs.jsonl"
    write_jsonl(path, [{"_id": f"d{i % 2}", "text": f"copy {i} of d{i % 2}"} for i in range(4)])
    for shard_size in (5000, 1):
        index = tmp_path / f"idx{shard_size}"
        report = ingest(path, index, settings=BM25_ONLY, executor="local", chunk=False, progress=False,
                        shard_size=shard_size, replace=True)
        rows = rows_by_doc(index)
        assert {d: r["text"] for d, r in rows.items()} == {"d0": "copy 2 of d0", "d1": "copy 3 of d1"}
        assert report.docs == 2, (shard_size, report)
    again = tmp_path / "again.jsonl"
    write_jsonl(again, [{"_id": "d0", "text": "the new d0"}, {"_id": "d2", "text": "a new d2"}])
    report = ingest(again, tmp_path / "idx1", settings=BM25_ONLY, executor="local", chunk=False, progress=False,
                    shard_size=1, replace=True)
    assert report.docs == 2
    assert len(rows_by_doc(tmp_path / "idx1")) == 3


def test_a_text_title_or_id_that_is_not_a_string_is_its_json_text_as_in_parquet(tmp_path):
    """A JSONL "text": true became "True" (Python's name for it), where the same value in a Parquet column is
    "true", and a list or an object already was its JSON text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "docs.jsonl"
    write_jsonl(path, [{"_id": "b", "title": False, "text": True}, {"_id": True, "text": 1.5},
                       {"_id": 7, "title": {"k": "v"}, "text": ["x", 2]}])
    report = ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (3, 0)
    rows = rows_by_doc(tmp_path / "idx")
    assert (rows["b"]["title"], rows["b"]["text"]) == ("false", "true")
    assert rows["true"]["text"] == "1.5"
    assert (rows["7"]["title"], rows["7"]["text"]) == ('{"k": "v"}', '["x", 2]')
    pq.write_table(pa.table({"_id": ["p"], "text": [True], "title": [False]}), tmp_path / "docs.parquet")
    ingest(tmp_path / "docs.parquet", tmp_path / "pq", settings=BM25_ONLY, executor="local", chunk=False,
           progress=False)
    assert (rows_by_doc(tmp_path / "pq")["p"]["title"], rows_by_doc(tmp_path / "pq")["p"]["text"]) == ("false", "true")


def test_id_fields_beside_the_one_used_are_kept_as_metadata_or_named_in_a_warning(tmp_path, caplog):
    """With `_id` present, a record's `id` (a second id: an ISBN, a row number) was dropped without a word, and so
    were `docno` and `doc_id`, which name the index's own columns and cannot be kept under those names."""
    import logging

    path = tmp_path / "docs.jsonl"
    write_jsonl(path, [{"_id": "a", "id": 42, "docno": "X-1", "doc_id": "Y-1", "text": "alpha"},
                       {"id": "b", "text": "beta: its id is its id field"}])
    csv = tmp_path / "docs.csv"
    csv.write_text("_id,id,text\nc,ISBN-1,gamma\n")
    caplog.set_level(logging.WARNING)
    for source in (path, csv):
        ingest(source, tmp_path / f"idx_{source.suffix[1:]}", settings=BM25_ONLY, executor="local", chunk=False,
               progress=False)
    rows = rows_by_doc(tmp_path / "idx_jsonl")
    assert (rows["a"]["id"], rows["b"]["id"]) == (42, None)  # b's id field is its id, not metadata too
    assert rows["a"]["docno"] == "a" and rows["a"]["doc_id"] == "a"
    assert rows_by_doc(tmp_path / "idx_csv")["c"]["id"] == "ISBN-1"
    shown = [r.getMessage() for r in caplog.records]
    [docno] = [m for m in shown if "docno" in m and "left out" in m]
    assert str(path) in docno and "_id" in docno, docno
    [doc_id] = [m for m in shown if "doc_id" in m and "left out" in m]
    assert str(path) in doc_id, doc_id


def test_markdown_front_matter_is_the_documents_title_and_fields_not_its_text(tmp_path, caplog):
    """A Markdown file's YAML front matter (Jekyll, Hugo, Obsidian) stayed in the text, where BM25 matched its
    keys and every passage of it began with 'layout: post'; its fields were not metadata a filter could read."""
    import logging

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "post.md").write_text("---\ntitle: 'Kea in winter'\nauthor: Ana\nyear: 2021\ndate: 2021-07-01\n"
                                    "draft: false\ntags: [birds, alps]\n---\n# A heading\n\nKea play in snow.\n")
    (folder / "broken.md").write_text("---\ntitle: [unclosed\n---\nHuia text.\n")
    (folder / "rule.md").write_text("---\n\nA note after a rule, with no front matter.\n")
    caplog.set_level(logging.WARNING)
    report = ingest(folder, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (3, 0)
    rows = rows_by_doc(tmp_path / "idx")
    post = rows["post.md"]
    assert (post["title"], post["text"]) == ("Kea in winter", "# A heading\n\nKea play in snow.\n")
    assert (post["author"], post["year"], post["date"], post["draft"]) == ("Ana", 2021, "2021-07-01", False)
    assert post["tags"] == '["birds", "alps"]'
    assert rows["broken.md"]["text"].startswith("---\ntitle: [unclosed") and rows["broken.md"]["author"] is None
    assert rows["rule.md"]["text"] == "---\n\nA note after a rule, with no front matter.\n"
    [warning] = [r.getMessage() for r in caplog.records if "front matter" in r.getMessage()]
    assert "broken.md" in warning and "not valid YAML" in warning, warning
    hits = Index.open(tmp_path / "idx").search_bm25(["author"], k=3)[0].docnos
    assert "post.md" not in hits
