"""Empty ids and empty texts, the same in every document source: an id of "" or whitespace is a missing id (the
document gets a content id, as with null); a text that is null, "" or whitespace is no document. JSONL reports it
as a bad record (file and line: an error, or skipped with on_error='skip'), as it does a record without the text
field; the table sources (CSV, Parquet, SQL) leave the row out, log the count and add it to the step's
``empty_texts`` usage."""

from __future__ import annotations

import gzip
import json
import logging
import sqlite3

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from operators.errors import SourceError
from operators.ids import content_doc_id
from operators.registry import create


def write_jsonl(path, records) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def test_jsonl_empty_or_blank_ids_get_content_ids_and_fall_back_to_the_next_id_field(tmp_path):
    path = write_jsonl(tmp_path / "docs.jsonl", [
        {"_id": "", "title": "T", "text": "glaciers move"},
        {"_id": "  ", "text": "rivers flow"},
        {"_id": "", "docno": "d3", "text": "lakes freeze"},
        {"_id": 0, "text": "zero is an id"},
        {"_id": "keep", "text": "kept"},
    ])
    out = create("sources.jsonl", {"path": path})(pa.table({}))
    assert out.column("docno").to_pylist() == [content_doc_id("T", "glaciers move"), content_doc_id("", "rivers flow"),
                                               "d3", "0", "keep"]


@pytest.mark.parametrize("text, said", [("", "empty or blank"), ("  \n\t", "empty or blank"), (None, "null"),
                                        ("\u200b\ufeff", "empty or blank"), ("\x00\x01\x07", "empty or blank"),
                                        ("\ufe0f\u3164\u2800", "empty or blank")])
def test_jsonl_empty_text_without_a_title_is_a_bad_record_naming_file_and_line(tmp_path, caplog, text, said):
    path = write_jsonl(tmp_path / "docs.jsonl", [{"_id": "a", "text": "x"}, {"_id": "b", "title": " ", "text": text},
                                                 {"_id": "c", "text": "y"}, {"_id": "d", "title": "Glaciers",
                                                                             "text": text}])
    with pytest.raises(SourceError, match=rf"docs.jsonl, line 2: empty text \(field 'text' is {said}, and there"):
        create("sources.jsonl", {"path": path})(pa.table({}))
    with caplog.at_level(logging.WARNING, logger="operators.sources"):
        out = create("sources.jsonl", {"path": path, "on_error": "skip"})(pa.table({}))
    assert out.column("docno").to_pylist() == ["a", "c", "d"] and "skipped 1 unreadable line(s)" in caplog.text


def test_beir_corpus_leaves_out_empty_texts_as_bad_lines(tmp_path):
    write_jsonl(tmp_path / "corpus.jsonl", [{"_id": "a", "text": "x"}, {"_id": "b", "text": " "}])
    with pytest.raises(SourceError, match="corpus.jsonl, line 2: empty text"):
        create("sources.beir", {"folder": str(tmp_path)})(pa.table({}))
    out = create("sources.beir", {"folder": str(tmp_path), "on_error": "skip"})(pa.table({}))
    assert out.column("docno").to_pylist() == ["a"]


def test_csv_empty_ids_get_content_ids_and_empty_texts_are_left_out_and_counted(tmp_path, caplog):
    path = tmp_path / "docs.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write('_id,title,text\n1,Ice,glaciers move\n,Lakes,lakes freeze\n" ",,rivers flow\n3,Glaciers,\n4,, \n'
                '5,,\u200b\u00ad\n')  # invisible characters alone: as blank as a space
    op = create("sources.csv", {"path": str(path)})
    with caplog.at_level(logging.WARNING, logger="operators.sources"):
        out = op(pa.table({}))
    assert out.column("docno").to_pylist() == ["1", content_doc_id("Lakes", "lakes freeze"),
                                               content_doc_id("", "rivers flow"), "3"]  # 3: a title alone
    assert out.column("text").to_pylist() == ["glaciers move", "lakes freeze", "rivers flow", ""]
    assert "skipped 2 document(s) with an empty text in" in caplog.text and "docs.csv.gz" in caplog.text
    assert op.drain_usage() == {"empty_texts": 2}


def test_tsv_gz_with_a_tab_delimiter(tmp_path):
    path = tmp_path / "docs.tsv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("_id\ttitle\ttext\n007\tIce\tglaciers, slowly\n")
    out = create("sources.csv", {"path": str(path), "delimiter": "\t"})(pa.table({}))
    assert out.to_pylist() == [{"docno": "007", "title": "Ice", "text": "glaciers, slowly"}]


def test_parquet_blank_ids_and_texts(tmp_path):
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"_id": ["a", "", " ", None, "e"], "text": ["x", "y", "z", "w", "\n"]}), path)
    op = create("sources.parquet", {"path": str(path)})
    out = op(pa.table({}))
    assert out.column("docno").to_pylist() == ["a"] + [content_doc_id(None, t) for t in "yzw"]
    assert op.drain_usage() == {"empty_texts": 1}


def test_sql_blank_ids_and_texts(tmp_path):
    db = tmp_path / "docs.db"
    with sqlite3.connect(db) as conn:
        conn.execute("create table docs (id integer, title text, text text)")
        conn.executemany("insert into docs values (?, ?, ?)",
                         [(1, "Ice", "glaciers"), (2, "Empty", ""), (3, "Null", None), (None, "No id", "rivers")])
    op = create("sources.sql", {"url": f"sqlite:///{db}", "table": "docs", "id_field": "id"})
    out = op(pa.table({}))
    assert out.column("docno").to_pylist() == ["1", "2", "3", content_doc_id("No id", "rivers")]  # titles alone
    assert op.drain_usage() == {}


def _untitled_then_titled(tmp_path, kind: str) -> str:
    """A folder of two files: the first without a title field, the second with one."""
    rows = [[{"_id": "a", "text": "untitled eagle"}], [{"_id": "b", "title": "Has", "text": "titled falcon"}]]
    for n, records in enumerate(rows):
        path = tmp_path / f"{n}.{kind}"
        if kind == "jsonl":
            write_jsonl(path, records)
        elif kind == "csv":
            path.write_text(",".join(records[0]) + "\n" + ",".join(records[0].values()) + "\n", encoding="utf-8")
        else:
            pq.write_table(pa.Table.from_pylist(records), path)
    return str(tmp_path)


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_documents_without_a_title_have_an_empty_one_in_every_batch(tmp_path, kind):
    """A batch (a file) without titles had no title column beside one with it: two schemas, which a flow merged into
    a null title after every metadata column (a search's ``hit["title"][:20]`` failed)."""
    op = create(f"sources.{kind}", {"path": _untitled_then_titled(tmp_path, kind)})
    assert [t.column_names[:3] for t in op.read(None)] == [["docno", "title", "text"]] * 2
    assert op(pa.table({})).select(["docno", "title"]).to_pylist() == [{"docno": "a", "title": ""},
                                                                       {"docno": "b", "title": "Has"}]
