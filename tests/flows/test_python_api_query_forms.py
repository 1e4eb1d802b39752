"""Queries a notebook hands ``Flow.run`` (and ``Index.search``) in a form it does not take: a queries file's name or
``pathlib.Path``, which ``tessera run --queries`` reads but ``Flow.run`` searched for as one query's text (or
refused as no query form, without saying how to read it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from operators.errors import SpecError


@pytest.fixture
def queries_file(tmp_path):
    path = tmp_path / "queries.jsonl"
    path.write_text(json.dumps({"_id": "q1", "text": "classical music"}) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("as_given", [str, Path], ids=["text", "path"])
def test_a_queries_files_name_is_refused_saying_to_read_it(bm25_index, queries_file, as_given):
    from flows.api import Flow, Index

    flow = Flow.load("bm25", index=bm25_index)
    for run in (flow.run, Index.open(bm25_index).search):
        with pytest.raises(SpecError) as err:
            run(as_given(queries_file))
        assert err.value.field == "queries"
        assert err.value.message == (f"queries '{queries_file}' is a file's name: Flow.run takes the queries "
                                     f"themselves; read the file first, flow.run(read_queries('{queries_file}')) "
                                     "(from flows.queries import read_queries), as tessera run --queries does")
    from flows.queries import read_queries

    assert flow.run(read_queries(str(queries_file))).table.column("qid").unique().to_pylist() == ["q1"]


def test_a_queries_file_under_the_home_folder_is_refused_too(bm25_index, queries_file, monkeypatch):
    from flows.api import Flow

    monkeypatch.setenv("HOME", str(queries_file.parent))
    with pytest.raises(SpecError, match=r"^field 'queries': queries '~/queries.jsonl' is a file's name: "
                                        r".*read_queries\('~/queries"):
        Flow.load("bm25", index=bm25_index).run("~/queries.jsonl")


def test_a_query_that_only_looks_like_a_file_name_is_searched(bm25_index, tmp_path):
    from flows.api import Flow

    flow = Flow.load("bm25", index=bm25_index)
    for text in (str(tmp_path / "none.jsonl"), "what is a .csv file", "music/art"):
        assert flow.run(text).table.column("query").unique().to_pylist() in ([text], [])


@pytest.mark.parametrize("columns, said", [
    ({"_id": ["q1"], "text": ["music"]}, "it lacks qid and query (columns: _id, text): rename _id to qid and text to "
                                         "query (df.rename(columns={'_id': 'qid', 'text': 'query'}), or a pyarrow "
                                         "Table's rename_columns)"),
    ({"qid": ["q1"], "text": ["music"]}, "it lacks query (columns: qid, text): rename text to query "
                                         "(df.rename(columns={'text': 'query'})"),
    ({"query": ["music"]}, "it lacks qid (columns: query): add one (a qid is text: '1', 'q7'), or pass the texts "
                           "alone, numbered 1, 2, ...: a list"),
    ({"qid": ["q1"]}, "it lacks query (columns: qid)"),
])
def test_a_queries_table_without_qid_or_query_names_what_it_lacks_and_the_rename(bm25_index, columns, said):
    """A DataFrame of BEIR's queries (``_id, text``, as a queries file may name them) was refused with the columns
    alone: ``needs columns qid and query, got ['_id', 'text']``."""
    import pandas as pd

    from flows.api import Flow

    with pytest.raises(SpecError) as err:
        Flow.load("bm25", index=bm25_index).run(pd.DataFrame(columns))
    assert err.value.field == "queries"
    assert err.value.message.startswith("a queries table needs columns qid and query; " + said)


def test_run_with_no_queries_says_which_step_reads_them_and_runs_a_flow_that_reads_none(bm25_index, tmp_path):
    """``flow.run()`` was Python's ``TypeError: missing 1 required positional argument``, though a flow whose steps
    start at a source reads no queries (and ``run(None)`` ran it)."""
    from flows.api import Flow

    with pytest.raises(SpecError) as err:
        Flow.load("bm25", index=bm25_index).run()
    assert (err.value.field, err.value.step) == ("queries", "bm25")
    assert "step 'bm25' (retrieve.bm25) reads the queries: give one text, a list of texts" in err.value.message
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "a", "text": "two words"}) + "\n", encoding="utf-8")
    read = Flow.load({"name": "read", "steps": {"read": {"op": "sources.jsonl", "params": {"path": str(corpus)}},
                                                "words": {"op": "analyze.word_count"}}})
    assert read.run().table.column("word_count").to_pylist() == [2]


def test_a_list_of_dicts_is_a_queries_table_of_their_fields(bm25_index):
    """``flow.run([{"qid": "q1", "query": "..."}])`` (a list of dicts, as ``ingest`` takes documents) was refused,
    ``query 1 of 1 is {...} (dict), not text``; its other fields are columns, as a table's are."""
    from flows.api import Flow, Index

    flow = Flow.load("bm25", index=bm25_index)
    result = flow.run([{"qid": "q1", "query": "classical music", "lang": "en"}, {"qid": "q2", "query": "opera"}])
    assert set(result.table.column("qid").to_pylist()) == {"q1", "q2"} and "lang" in result.table.column_names
    assert Index.open(bm25_index).search([{"qid": "q7", "query": "opera"}]).column("qid").unique().to_pylist() == \
        ["q7"]
    with pytest.raises(SpecError) as err:  # the fields a table needs, as of a table
        flow.run([{"_id": "q1", "text": "opera"}])
    assert "it lacks qid and query (columns: _id, text): rename _id to qid and text to query" in err.value.message
    with pytest.raises(SpecError) as err:  # dicts and texts mixed: each query is one or the other
        flow.run([{"qid": "q1", "query": "opera"}, "music"])
    assert err.value.message.startswith("query 1 of 2 is {'qid': 'q1', 'query': 'opera'} (dict), not text")
    assert err.value.message.endswith("or a list of dicts with qid and query")
