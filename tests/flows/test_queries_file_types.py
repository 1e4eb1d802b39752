"""A queries file is read by its suffix: one without a suffix, or with one Tessera does not read, is refused naming
the file and the suffixes it reads."""

from __future__ import annotations

import pytest

from flows.queries import QUERY_SUFFIXES, read_queries
from operators.errors import SpecError


def refusal(path) -> str:
    with pytest.raises(SpecError) as err:
        read_queries(str(path))
    assert err.value.field == "queries"
    return err.value.message


def test_a_queries_file_without_a_suffix_is_said_to_have_none_with_the_suffixes_read(tmp_path):
    """``tessera run bm25 -q myq`` said "myq: unknown queries file type ''"."""
    queries = tmp_path / "myq"
    queries.write_text("honey bees\n", encoding="utf-8")
    assert refusal(queries) == (f"{queries}: the queries file has no suffix to say its type (use one of "
                                f"{', '.join(QUERY_SUFFIXES)}, or a TREC topic file)")


def test_a_queries_file_of_another_suffix_is_named_by_it(tmp_path):
    queries = tmp_path / "queries.xml"
    queries.write_text("<q>honey bees</q>\n", encoding="utf-8")
    assert refusal(queries).startswith(f"{queries}: unknown queries file type '.xml' (use one of .jsonl, ")
    (tmp_path / "queries.txt").write_text("honey bees\n", encoding="utf-8")
    assert read_queries(str(tmp_path / "queries.txt")).column("query").to_pylist() == ["honey bees"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_column_given_twice_is_named(tmp_path, suffix):
    """A CSV header ``qid,query,qid`` was an internal error (KeyError), a Parquet file's a message in Arrow's words."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / f"twice{suffix}"
    if suffix == ".csv":
        path.write_text("qid,query,qid\n1,honey,2\n", encoding="utf-8")
    else:
        pq.write_table(pa.table([pa.array(["1"]), pa.array(["honey"]), pa.array(["2"])], names=["qid", "query", "qid"]),
                       path)
    assert refusal(path) == f"{path}: column(s) qid appear more than once"


@pytest.mark.parametrize("column, values, kind", [
    ("query", [["honey"]], "list<element: string>"), ("query", [b"honey"], "binary"),
    ("query", [{"x": "honey"}], "struct<x: string>"), ("qid", [[1]], "list<element: int64>"),
    ("query", [3.5], "double")])
def test_a_parquet_column_that_is_not_text_is_refused_not_searched_as_its_python_spelling(tmp_path, column, values,
                                                                                           kind):
    """A query of type list was searched as "['honey']", bytes as "b'honey'"."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = {"qid": ["1"], "query": ["honey"], column: values}
    pq.write_table(pa.table(columns), tmp_path / "q.parquet")
    what = "text or whole numbers" if column == "qid" else "text"
    assert refusal(tmp_path / "q.parquet") == f"{tmp_path / 'q.parquet'}: column {column} holds {kind}, not {what}"


def test_a_csv_is_read_as_text_so_ids_and_queries_keep_their_spelling(tmp_path):
    """qid 007 was read as the number 7 (a qrels file's '007' matched nothing), a query 1984 as a number."""
    (tmp_path / "q.csv").write_text("qid,query\n007,1984\n1.50,honey\n", encoding="utf-8")
    assert read_queries(str(tmp_path / "q.csv")).to_pylist() == [{"qid": "007", "query": "1984"},
                                                                 {"qid": "1.50", "query": "honey"}]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"qid": [7], "query": ["honey"]}), tmp_path / "q.parquet")  # whole numbers stay ids
    assert read_queries(str(tmp_path / "q.parquet")).to_pylist() == [{"qid": "7", "query": "honey"}]


def test_a_json_file_of_one_pretty_printed_query_object_is_read(tmp_path):
    """It was read as JSON lines and called "not JSON (Expecting property name ...)" at its first line."""
    (tmp_path / "one.json").write_text('{\n  "_id": "a",\n  "text": "honey"\n}\n', encoding="utf-8")
    assert read_queries(str(tmp_path / "one.json")).to_pylist() == [{"qid": "a", "query": "honey"}]
    (tmp_path / "lines.json").write_text('{"_id": "a", "text": "honey"}\n{"_id": "b", "text": "opera"}\n',
                                         encoding="utf-8")  # JSON lines under .json: as before
    assert read_queries(str(tmp_path / "lines.json")).column("qid").to_pylist() == ["a", "b"]


def test_a_queries_file_under_the_home_folder_is_read_and_a_tilde_query_searched(tmp_path, monkeypatch):
    """``read_queries("~/q.txt")`` in Python said ``queries file not found: ~/q.txt`` (the shell expands ``~`` for
    ``--queries``; Python does not)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "q.txt").write_text("honey bees\n", encoding="utf-8")
    assert read_queries("~/q.txt").column("query").to_pylist() == ["honey bees"]
    assert read_queries("~nosuchuser9 is no user").column("query").to_pylist() == ["~nosuchuser9 is no user"]
