"""sources.jsonl: contract, counts on real files, byte-range splits, bad lines, id fallbacks."""

from __future__ import annotations

import gzip
import json
import logging
import re

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.errors import ParamsError, SourceError, SourceNotFoundError, TesseraError
from operators.ids import content_doc_id
from operators.registry import create
from operators.testing import SAMPLE_CORPUS, OperatorContract


def sample_ids() -> list[str]:
    with open(SAMPLE_CORPUS, encoding="utf-8") as f:
        return [json.loads(line)["_id"] for line in f]


def read_splits(op) -> list[pa.Table]:
    """Every split read on its own, as an executor would."""
    return [table for split in op.splits() for table in op.read(split)]


def write_jsonl(path, records, *, raw_lines=()):
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record) + "\n")
        for line in raw_lines:
            f.write(line)
    return path


class TestJsonlContract(OperatorContract):
    operator_name = "sources.jsonl"

    def make_operator(self, **params):
        return create(self.operator_name, {"path": str(SAMPLE_CORPUS), **params})


def test_sample_corpus_is_read_whole_and_in_order():
    out = create("sources.jsonl", {"path": str(SAMPLE_CORPUS)})(pa.table({}))
    assert out.column_names == ["docno", "title", "text"]
    assert out.column("docno").to_pylist() == sample_ids()
    assert out.schema.field("text").type == pa.string()
    first = json.loads(SAMPLE_CORPUS.read_text(encoding="utf-8").splitlines()[0])
    assert out.slice(0, 1).to_pylist()[0] == {"docno": first["_id"], "title": first["title"], "text": first["text"]}


@pytest.mark.data
def test_scifact_corpus_count_equals_line_count(shared_data):
    path = shared_data / "scifact" / "corpus.jsonl"
    lines = sum(1 for _ in open(path, encoding="utf-8"))
    out = create("sources.jsonl", {"path": str(path), "num_splits": 5})(pa.table({}))
    assert out.num_rows == lines == 5183
    assert len(set(out.column("docno").to_pylist())) == 5183


def test_byte_range_splits_read_every_line_once():
    op = create("sources.jsonl", {"path": str(SAMPLE_CORPUS), "num_splits": 7, "batch_rows": 64})
    splits = op.splits()
    assert len(splits) == 7
    tables = read_splits(op)
    assert all(t.num_rows <= 64 for t in tables)
    ids = [i for t in tables for i in t.column("docno").to_pylist()]
    assert ids == sample_ids()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lengths=st.lists(st.integers(1, 60), min_size=1, max_size=30),  # an empty text is a bad record
    num_splits=st.integers(1, 40),
    crlf=st.booleans(),
    trailing_newline=st.booleans(),
)
def test_any_cut_reads_every_line_exactly_once(tmp_path, lengths, num_splits, crlf, trailing_newline):
    path = tmp_path / "cut.jsonl"
    end = "\r\n" if crlf else "\n"
    lines = [json.dumps({"_id": f"d{i}", "text": "x" * n}) for i, n in enumerate(lengths)]
    path.write_text(end.join(lines) + (end if trailing_newline else ""), encoding="utf-8", newline="")
    op = create("sources.jsonl", {"path": str(path), "num_splits": num_splits})
    ids = [i for t in read_splits(op) for i in t.column("docno").to_pylist()]
    assert ids == [f"d{i}" for i in range(len(lengths))]


def test_bad_line_raises_naming_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"_id": "a", "text": "x"}, {"_id": "b", "text": "y"}],
                       raw_lines=['{"_id": "c", "text": \n', '{"_id": "d", "text": "z"}\n'])
    with pytest.raises(SourceError) as err:
        create("sources.jsonl", {"path": str(path)})(pa.table({}))
    assert "bad.jsonl, line 3" in str(err.value) and "not valid JSON" in str(err.value)


def test_bad_line_in_a_later_split_has_its_file_line_number(tmp_path):
    records = [{"_id": f"d{i}", "text": "some text " * 5} for i in range(200)]
    path = write_jsonl(tmp_path / "big.jsonl", records, raw_lines=["this is not json\n"])
    op = create("sources.jsonl", {"path": str(path), "num_splits": 4})
    last = op.splits()[-1]
    with pytest.raises(SourceError, match=r"big\.jsonl, line 201"):
        list(op.read(last))


def test_skip_mode_skips_and_logs_the_count(tmp_path, caplog):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"_id": "a", "text": "x"}],
                       raw_lines=["[1, 2]\n", "{oops\n", '{"_id": "no-text"}\n', '{"_id": "b", "text": "y"}\n'])
    with caplog.at_level(logging.WARNING, logger="operators.sources"):
        out = create("sources.jsonl", {"path": str(path), "on_error": "skip"})(pa.table({}))
    assert out.column("docno").to_pylist() == ["a", "b"]
    assert "skipped 3 unreadable line(s)" in caplog.text and "lines 2, 3, 4" in caplog.text


def test_a_lone_surrogate_is_a_bad_line_naming_its_field(tmp_path):
    """Arrow cannot hold it: the batch's table failed with a UnicodeEncodeError that named no line."""
    path = write_jsonl(tmp_path / "docs.jsonl", [{"_id": "a", "text": "x"}],
                       raw_lines=['{"_id": "b\\ud83d", "text": "y"}\n', '{"_id": "c", "text": "\\ud83d\\ude00"}\n'])
    with pytest.raises(SourceError, match=r"line 2: field '_id' holds a lone surrogate \(\\ud83d\) at character 1"):
        create("sources.jsonl", {"path": str(path)})(pa.table({}))
    out = create("sources.jsonl", {"path": str(path), "on_error": "skip"})(pa.table({}))
    assert out.column("docno").to_pylist() == ["a", "c"] and out.column("text").to_pylist() == ["x", "\U0001F600"]


def test_missing_text_field_is_an_error_not_a_silent_drop(tmp_path):
    path = write_jsonl(tmp_path / "docs.jsonl", [{"_id": "a", "body": "x"}])
    with pytest.raises(SourceError, match=r"line 1: no field 'text'.*'body'"):
        create("sources.jsonl", {"path": str(path)})(pa.table({}))
    out = create("sources.jsonl", {"path": str(path), "text_field": "body"})(pa.table({}))
    assert out.to_pylist() == [{"docno": "a", "title": "", "text": "x"}]
    titled = write_jsonl(tmp_path / "titles.jsonl", [{"_id": "a", "title": "Aspirin"}])  # a corpus of titles only
    said = "line 1: no field 'text' (fields: ['_id', 'title']); a title alone is a document when its 'text' is empty"
    with pytest.raises(SourceError, match=re.escape(said + ': add "text": ""')):
        create("sources.jsonl", {"path": str(titled)})(pa.table({}))


def test_missing_file_and_empty_glob_name_the_path(tmp_path):
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(SourceNotFoundError, match="nope.jsonl") as err:
        create("sources.jsonl", {"path": str(missing)})(pa.table({}))
    assert isinstance(err.value, TesseraError) and err.value.field == "params.path"
    with pytest.raises(SourceNotFoundError, match=r"no file matches .*\*\.jsonl"):
        create("sources.jsonl", {"path": str(tmp_path / "*.jsonl")}).splits()


def test_glob_and_folder_read_files_in_order(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", [{"_id": "a1", "text": "x"}, {"_id": "a2", "text": "y"}])
    write_jsonl(tmp_path / "b.jsonl", [{"_id": "b1", "text": "z"}])
    (tmp_path / "notes.txt").write_text("not a corpus")
    for path in (str(tmp_path / "*.jsonl"), str(tmp_path)):
        op = create("sources.jsonl", {"path": path, "num_splits": 3})
        ids = [i for t in read_splits(op) for i in t.column("docno").to_pylist()]
        assert ids == ["a1", "a2", "b1"]


def test_gzipped_file(tmp_path):
    path = tmp_path / "docs.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write('{"_id": "g1", "text": "zipped"}\n{"_id": "g2", "text": "too"}\n')
    out = create("sources.jsonl", {"path": str(path), "num_splits": 4})(pa.table({}))
    assert out.column("docno").to_pylist() == ["g1", "g2"]


def test_id_fallbacks_and_content_ids(tmp_path):
    path = write_jsonl(tmp_path / "ids.jsonl", [
        {"_id": 7, "title": "T", "text": "int id"},
        {"docno": "dn", "title": "T", "text": "docno field"},
        {"id": "plain", "title": "T", "text": "id field"},
        {"title": "No id", "text": "content id"},
    ])
    out = create("sources.jsonl", {"path": str(path)})(pa.table({}))
    assert out.column("docno").to_pylist() == ["7", "dn", "plain", content_doc_id("No id", "content id")]
    content = create("sources.jsonl", {"path": str(path), "id_mode": "content"})(pa.table({}))
    assert content.column("docno").to_pylist() == [content_doc_id("T", t) for t in
                                                   ["int id", "docno field", "id field"]] + [
        content_doc_id("No id", "content id")]
    # an explicit id field has no fallbacks: records without it get content ids
    explicit = create("sources.jsonl", {"path": str(path), "id_field": "docno"})(pa.table({}))
    assert explicit.column("docno").to_pylist()[:2] == [content_doc_id("T", "int id"), "dn"]


def test_metadata_fields_are_kept_or_selected(tmp_path):
    path = write_jsonl(tmp_path / "meta.jsonl", [
        {"_id": "a", "text": "x", "url": "u1", "year": 2001, "tags": ["p", "q"]},
        {"_id": "b", "text": "y", "url": "u2", "year": None, "tags": []},
    ])
    out = create("sources.jsonl", {"path": str(path)})(pa.table({}))
    assert out.column_names == ["docno", "title", "text", "url", "year", "tags"]
    assert out.column("year").to_pylist() == [2001, None]
    assert out.column("tags").to_pylist() == ['["p", "q"]', "[]"]
    picked = create("sources.jsonl", {"path": str(path), "fields": ["url", "missing"]})(pa.table({}))
    assert picked.column_names == ["docno", "title", "text", "url", "missing"]
    assert picked.column("missing").to_pylist() == [None, None]
    none = create("sources.jsonl", {"path": str(path), "fields": []})(pa.table({}))
    assert none.column_names == ["docno", "title", "text"]


def test_limit_reads_the_first_documents_as_one_split():
    op = create("sources.jsonl", {"path": str(SAMPLE_CORPUS), "limit": 25, "batch_rows": 10, "num_splits": 4})
    assert op.splits() == [None]
    tables = list(op.read(None))
    assert [t.num_rows for t in tables] == [10, 10, 5]
    assert pa.concat_tables(tables).column("docno").to_pylist() == sample_ids()[:25]


@pytest.mark.parametrize("params, field", [
    ({"num_splits": 0}, "params.num_splits"),
    ({"batch_rows": -1}, "params.batch_rows"),
    ({"on_error": "ignore"}, "params.on_error"),
    ({"limit": 0}, "params.limit"),
    ({"id_mode": "hash"}, "params.id_mode"),
    ({"colour": "red"}, "params.colour"),
])
def test_bad_params_name_the_field(params, field):
    with pytest.raises(ParamsError) as err:
        create("sources.jsonl", {"path": str(SAMPLE_CORPUS), **params})
    assert err.value.field == field


def test_path_is_required():
    with pytest.raises(ParamsError) as err:
        create("sources.jsonl", {})
    assert err.value.field == "params.path"


def test_an_integer_beyond_64_bits_is_kept_as_its_digits_not_an_overflow(tmp_path):
    path = write_jsonl(tmp_path / "big.jsonl", [{"_id": "a", "text": "small", "n": 1},
                                                {"_id": "b", "text": "large", "n": 10**23 + 1}])
    (table,) = read_splits(create("sources.jsonl", {"path": str(path)}))
    assert table.column("n").to_pylist() == ["1", "100000000000000000000001"]  # exact, where a double would round


def test_a_number_as_an_id_or_a_text_is_kept_as_it_was_written(tmp_path):
    """Python's float wrote ``1e2`` as ``100.0`` and ``1.10`` as ``1.1`` (one id with ``1.1``), and ``1E400`` and
    ``2E400`` both as ``Infinity``: the second of each pair was left out as a duplicate, and a search for ``1e2``
    did not find the text it was; a metadata number stays a number."""
    path = tmp_path / "numbers.jsonl"
    path.write_text('{"_id": 1e2, "text": "a"}\n{"_id": 1.1, "text": "b"}\n{"_id": 1.10, "text": "c"}\n'
                    '{"_id": 1E400, "text": "d"}\n{"_id": 2E400, "text": "e"}\n'
                    '{"_id": "n1", "text": 1e2, "weight": 2.50}\n', encoding="utf-8")
    (table,) = read_splits(create("sources.jsonl", {"path": str(path)}))
    assert table.column("docno").to_pylist() == ["1e2", "1.1", "1.10", "1E400", "2E400", "n1"]
    assert table.column("text").to_pylist()[-1] == "1e2"
    assert table.column("weight").type == pa.float64() and table.column("weight").to_pylist()[-1] == 2.5
