"""sources.parquet: contract, same documents as the JSONL file, row-group splits, column mapping."""

from __future__ import annotations

import logging

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from operators.errors import ParamsError, SourceError, SourceNotFoundError
from operators.ids import content_doc_id
from operators.registry import create
from operators.testing import SAMPLE_CORPUS, OperatorContract


def sample_table() -> pa.Table:
    return create("sources.jsonl", {"path": str(SAMPLE_CORPUS)})(pa.table({}))


@pytest.fixture(scope="module")
def sample_parquet(tmp_path_factory):
    """The sample corpus as Parquet with BEIR column names, in row groups of 100."""
    table = sample_table().rename_columns(["_id", "title", "text"])
    path = tmp_path_factory.mktemp("parquet") / "corpus.parquet"
    pq.write_table(table, path, row_group_size=100)
    return path


class TestParquetContract(OperatorContract):
    operator_name = "sources.parquet"

    @pytest.fixture(autouse=True)
    def _corpus(self, sample_parquet):
        self.path = sample_parquet

    def make_operator(self, **params):
        return create(self.operator_name, {"path": str(self.path), **params})


def test_same_documents_as_the_jsonl_source(sample_parquet):
    out = create("sources.parquet", {"path": str(sample_parquet)})(pa.table({}))
    assert out.equals(sample_table())


def test_row_group_splits_read_every_row_once(sample_parquet):
    op = create("sources.parquet", {"path": str(sample_parquet), "num_splits": 4, "batch_rows": 30})
    splits = op.splits()
    assert len(splits) == 4
    tables = [t for s in splits for t in op.read(s)]
    assert all(t.num_rows <= 30 for t in tables)
    assert [d for t in tables for d in t.column("docno").to_pylist()] == sample_table().column("docno").to_pylist()


def test_column_mapping_metadata_and_content_ids(tmp_path):
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({
        "pid": [1, 2, None],
        "heading": ["A", "B", "C"],
        "body": ["first", None, "third"],
        "year": [2001, 2002, 2003],
        "tags": [["x"], [], ["y", "z"]],
    }), path)
    out = create("sources.parquet", {"path": str(path), "id_field": "pid", "text_field": "body",
                                     "title_field": "heading"})(pa.table({}))
    assert out.column_names == ["docno", "title", "text", "year", "tags"]
    # the row without a body but with a heading is a document of its title (one with neither is left out)
    assert out.column("docno").to_pylist() == ["1", "2", content_doc_id("C", "third")]
    assert out.column("text").to_pylist() == ["first", "", "third"]
    assert out.column("tags").to_pylist() == [["x"], [], ["y", "z"]]
    only = create("sources.parquet", {"path": str(path), "text_field": "body", "fields": ["year"]})(pa.table({}))
    assert only.column_names == ["docno", "title", "text", "year"]
    assert only.column("docno").to_pylist() == [content_doc_id(None, t) for t in ["first", "third"]]


def test_limit_and_glob(tmp_path):
    for name, ids in (("a.parquet", ["a1", "a2"]), ("b.parquet", ["b1", "b2"])):
        pq.write_table(pa.table({"_id": ids, "text": ["t"] * 2}), tmp_path / name)
    op = create("sources.parquet", {"path": str(tmp_path / "*.parquet")})
    assert len(op.splits()) == 2
    assert op(pa.table({})).column("docno").to_pylist() == ["a1", "a2", "b1", "b2"]
    limited = create("sources.parquet", {"path": str(tmp_path / "*.parquet"), "limit": 3})(pa.table({}))
    assert limited.column("docno").to_pylist() == ["a1", "a2", "b1"]


def test_missing_text_column_and_missing_file(tmp_path):
    path = tmp_path / "docs.parquet"
    pq.write_table(pa.table({"_id": ["a"], "body": ["x"]}), path)
    with pytest.raises(SourceError, match=r"no text column 'text'.*'body'") as err:
        create("sources.parquet", {"path": str(path)})(pa.table({}))
    assert err.value.field == "params.text_field"
    with pytest.raises(SourceNotFoundError, match="absent.parquet"):
        create("sources.parquet", {"path": str(tmp_path / "absent.parquet")})(pa.table({}))


def test_bad_params_name_the_field(sample_parquet):
    with pytest.raises(ParamsError) as err:
        create("sources.parquet", {"path": str(sample_parquet), "num_splits": 0})
    assert err.value.field == "params.num_splits"


def test_a_binary_text_column_is_read_as_its_utf8_text_and_bytes_that_are_not_text_are_refused(tmp_path):
    """Some writers store strings as binary without the UTF-8 annotation: stored as Python's "b'ok'" before."""
    good, bad = tmp_path / "good.parquet", tmp_path / "bad.parquet"
    pq.write_table(pa.table({"_id": [b"x1", b"x2"], "text": pa.array([b"caf\xc3\xa9 au lait", b"ok"])}), good)
    pq.write_table(pa.table({"_id": ["x1"], "text": pa.array([b"bin\xff"])}), bad)
    out = create("sources.parquet", {"path": str(good)})(pa.table({}))
    assert out.column("docno").to_pylist() == ["x1", "x2"] and out.column("text").to_pylist() == ["café au lait", "ok"]
    with pytest.raises(SourceError, match="a binary column holds bytes that are not UTF-8 text"):
        create("sources.parquet", {"path": str(bad)})(pa.table({}))


def test_binary_metadata_is_text_when_it_is_utf8_and_left_out_naming_it_when_not(tmp_path, caplog):
    """A binary metadata column reached the index as it was: ``b'en'`` in results, and an ingest of a column of
    other bytes (an image, a digest) ended in an internal UnicodeDecodeError while staging its shard."""
    path = tmp_path / "meta.parquet"
    pq.write_table(pa.table({"_id": ["a", "b"], "text": ["one", "two"], "lang": pa.array([b"en", None]),
                             "digest": pa.array([b"\xff\x00", b"ok"])}), path)
    with caplog.at_level(logging.WARNING, logger="operators.sources"):
        out = create("sources.parquet", {"path": str(path)})(pa.table({}))
    assert out.column_names == ["docno", "title", "text", "lang"] and out.column("lang").to_pylist() == ["en", None]
    assert out.schema.field("lang").type == pa.string()
    assert "column 'digest' holds bytes that are not UTF-8 text" in caplog.text
    with pytest.raises(SourceError, match="column 'digest' holds bytes that are not UTF-8 text") as err:
        create("sources.parquet", {"path": str(path), "fields": ["lang", "digest"]})(pa.table({}))
    assert err.value.field == "params.fields"
