"""sources.beir and load_qrels: contract, SciFact counts, split filtering, missing files."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from operators.errors import ParamsError, SourceError, SourceNotFoundError
from operators.registry import create
from operators.sources._beir_files import load_qrels
from operators.testing import SAMPLE_CORPUS, OperatorContract

SAMPLE_FOLDER = SAMPLE_CORPUS.parent  # corpus.jsonl + queries.jsonl, no qrels


class TestBeirCorpusContract(OperatorContract):
    operator_name = "sources.beir"

    def make_operator(self, **params):
        return create(self.operator_name, {"folder": str(SAMPLE_FOLDER), **params})


class TestBeirQueriesContract(OperatorContract):
    operator_name = "sources.beir"

    def make_operator(self, **params):
        # limit 3: the contract's one-query check expects qids among testing.SAMPLE_QUERIES (q1-q3)
        return create(self.operator_name,
                      {"folder": str(SAMPLE_FOLDER), "part": "queries", "split": None, "limit": 3, **params})

    def test_emits_the_sample_queries(self):
        out = self.make_operator(limit=None)(pa.table({}))
        assert out.column_names == ["qid", "query"]
        assert out.column("qid").to_pylist() == ["q1", "q2", "q3", "q4"]


def write_beir(folder, *, qrels_lines):
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w") as f:
        for i in range(5):
            f.write(json.dumps({"_id": f"d{i}", "title": f"T{i}", "text": f"text {i}"}) + "\n")
    with open(folder / "queries.jsonl", "w") as f:
        for i in range(4):
            f.write(json.dumps({"_id": f"q{i}", "text": f"query {i}"}) + "\n")
    (folder / "qrels" / "test.tsv").write_text("".join(qrels_lines))
    return folder


@pytest.mark.data
class TestScifact:
    def test_corpus_count_equals_line_count(self, shared_data):
        folder = shared_data / "scifact"
        lines = sum(1 for _ in open(folder / "corpus.jsonl", encoding="utf-8"))
        op = create("sources.beir", {"folder": str(folder), "num_splits": 3})
        assert len(op.splits()) == 3
        tables = [t for s in op.splits() for t in op.read(s)]
        docnos = [d for t in tables for d in t.column("docno").to_pylist()]
        assert len(docnos) == lines == 5183 and len(set(docnos)) == 5183
        assert tables[0].column_names == ["docno", "title", "text"]

    @pytest.mark.parametrize("split, expected", [("test", 300), ("train", 809), (None, 1109)])
    def test_queries_of_a_split(self, shared_data, split, expected):
        folder = shared_data / "scifact"
        out = create("sources.beir", {"folder": str(folder), "part": "queries", "split": split})(pa.table({}))
        assert out.num_rows == expected
        assert out.column_names == ["qid", "query"]
        if split is not None:
            judged = set(load_qrels(folder, split).column("qid").to_pylist())
            assert set(out.column("qid").to_pylist()) == judged

    def test_load_qrels(self, shared_data):
        folder = shared_data / "scifact"
        qrels = load_qrels(folder, "test")
        lines = (folder / "qrels" / "test.tsv").read_text().splitlines()
        assert qrels.num_rows == len(lines) - 1 == 339  # less the header
        assert qrels.schema == pa.schema([("qid", pa.string()), ("docno", pa.string()), ("relevance", pa.int32())])
        first = lines[1].split("\t")
        assert qrels.slice(0, 1).to_pylist() == [{"qid": first[0], "docno": first[1], "relevance": int(first[2])}]
        corpus = create("sources.beir", {"folder": str(folder)})(pa.table({}))
        assert pc.all(pc.is_in(qrels.column("docno"), value_set=corpus.column("docno"))).as_py()


def test_queries_limit_applies_after_the_split_filter(tmp_path):
    folder = write_beir(tmp_path / "set", qrels_lines=["query-id\tcorpus-id\tscore\n", "q1\td0\t1\n",
                                                       "q3\td2\t2\n", "q3\td4\t0\n"])
    out = create("sources.beir", {"folder": str(folder), "part": "queries"})(pa.table({}))
    assert out.to_pylist() == [{"qid": "q1", "query": "query 1"}, {"qid": "q3", "query": "query 3"}]
    limited = create("sources.beir", {"folder": str(folder), "part": "queries", "limit": 1})(pa.table({}))
    assert limited.column("qid").to_pylist() == ["q1"]


def test_trec_style_qrels_without_header(tmp_path):
    folder = write_beir(tmp_path / "set", qrels_lines=["q0 0 d1 1\n", "q2 0 d3 2\n"])
    qrels = load_qrels(folder, "test")
    assert qrels.to_pylist() == [{"qid": "q0", "docno": "d1", "relevance": 1},
                                 {"qid": "q2", "docno": "d3", "relevance": 2}]


def test_a_qrels_line_of_another_width_names_both_forms_it_may_take(tmp_path):
    """Space-separated lines are read as tab-separated ones are, and four columns (TREC) as three (BEIR): the
    message said "3 tab-separated columns" of a line of five words separated by spaces."""
    folder = write_beir(tmp_path / "set", qrels_lines=["q0 0 d1 1 extra\n"])
    with pytest.raises(SourceError, match=r"line 1: expected 3 columns \(query-id, corpus-id, score: BEIR\) or 4 "
                                          r"\(qid, iteration, docno, relevance: TREC\), separated by tabs or spaces; "
                                          r"got 5"):
        load_qrels(folder, "test")


def test_missing_split_lists_the_splits_there(tmp_path):
    folder = write_beir(tmp_path / "set", qrels_lines=["query-id\tcorpus-id\tscore\n"])
    with pytest.raises(SourceNotFoundError, match=r"dev\.tsv.*\['test'\]"):
        create("sources.beir", {"folder": str(folder), "part": "queries", "split": "dev"})(pa.table({}))


def test_missing_folder_and_missing_corpus_name_the_path(tmp_path):
    with pytest.raises(SourceNotFoundError, match="nowhere"):
        create("sources.beir", {"folder": str(tmp_path / "nowhere")})(pa.table({}))
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceNotFoundError, match=r"empty' has no corpus\.jsonl"):
        create("sources.beir", {"folder": str(tmp_path / "empty")})(pa.table({}))


def test_bad_params_name_the_field():
    with pytest.raises(ParamsError) as err:
        create("sources.beir", {"folder": str(SAMPLE_FOLDER), "part": "qrels"})
    assert err.value.field == "params.part"


@pytest.mark.parametrize("encoding", ["utf-16", "latin-1"])
def test_qrels_that_are_not_utf8_are_an_error_naming_the_file_and_line(tmp_path, encoding):
    folder = write_beir(tmp_path / "set", qrels_lines=[])
    text = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1 é\n" if encoding == "latin-1" else "q1\td1\t1\n"
    (folder / "qrels" / "test.tsv").write_bytes(text.encode(encoding))
    line = 3 if encoding == "latin-1" else 1
    with pytest.raises(SourceError, match=rf"test\.tsv, line {line}: not UTF-8 text") as err:
        load_qrels(folder, "test")
    if encoding == "latin-1":  # said as a source and the trainer say it: the byte, where, and the iconv line
        assert "line 3: not UTF-8 text (byte 0xe9 at byte 9 of the line: invalid continuation byte); " in str(err.value)
        assert "save the qrels as UTF-8 (iconv -f " in str(err.value)


def test_a_header_is_a_first_line_naming_its_columns_and_no_other_line_is_dropped(tmp_path):
    blank_first = write_beir(tmp_path / "blank", qrels_lines=["\n", "query-id\tcorpus-id\tscore\n", "q1\td1\t2\n"])
    assert load_qrels(blank_first, "test").to_pylist() == [{"qid": "q1", "docno": "d1", "relevance": 2}]
    bad_first = write_beir(tmp_path / "bad", qrels_lines=["q1\td1\tx\n", "q2\td2\t1\n"])
    with pytest.raises(SourceError, match=r"line 1: relevance 'x' is not a number \(a header line names"):
        load_qrels(bad_first, "test")


def test_a_grade_beyond_int32_is_an_error_naming_its_line(tmp_path):
    folder = write_beir(tmp_path / "set", qrels_lines=["q1\td1\t1\n", "q2\td2\t99999999999\n"])
    with pytest.raises(SourceError, match=r"line 2: relevance '99999999999' is out of range"):
        load_qrels(folder, "test")
    folder = write_beir(tmp_path / "ok", qrels_lines=[f"q1\td1\t{2**31 - 1}\n", f"q2\td2\t{-(2**31 - 1)}\n"])
    assert load_qrels(folder, "test").column("relevance").to_pylist() == [2**31 - 1, -(2**31 - 1)]
