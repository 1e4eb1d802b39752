"""Helpers over result tables: ranks, grouping, validation."""

import pyarrow as pa
import pytest

from operators import create
from operators.errors import MissingColumnsError
from operators.tables import group_by_qid, qid_groups, query_rows, require_columns, set_ranking


def test_set_ranking_orders_by_score_breaks_ties_by_docno_and_keeps_step_copy():
    table = pa.table({"qid": ["b", "a", "b", "a", "b"], "docno": ["d3", "d1", "d1", "d2", "d2"]})
    out = set_ranking(table, [0.5, 1.0, 0.5, 2.0, 0.9], "bm25")
    assert out.column("qid").to_pylist() == ["b", "b", "b", "a", "a"]
    assert out.column("docno").to_pylist() == ["d2", "d1", "d3", "d2", "d1"]
    assert out.column("rank").to_pylist() == [1, 2, 3, 1, 2]
    assert out.column("rank_bm25").to_pylist() == out.column("rank").to_pylist()
    assert out.column("score_bm25").to_pylist() == [0.9, 0.5, 0.5, 2.0, 1.0]
    assert out.schema.field("rank").type == pa.int32()


def test_set_ranking_by_a_rank_column_renumbers_interleaved_groups_nulls_last_ties_by_docno():
    table = pa.table({"qid": ["x", "y", "x", "x", "y"], "docno": ["b", "c", "a", "d", "e"],
                      "rank": pa.array([2, None, 2, None, 7], pa.int32()), "score": [0.1, 0.2, 0.3, 0.4, 0.5]})
    out = set_ranking(table, rank_by="rank")
    assert out.column("qid").to_pylist() == ["x", "x", "x", "y", "y"]
    assert out.column("docno").to_pylist() == ["a", "b", "d", "e", "c"]
    assert out.column("rank").to_pylist() == [1, 2, 3, 1, 2]
    assert out.column_names == table.column_names and out.column("score").to_pylist() == [0.3, 0.1, 0.4, 0.5, 0.2]


def test_qid_groups_keep_first_appearance_order():
    table = pa.table({"qid": ["q2", "q1", "q2", "q3"], "i": [0, 1, 2, 3]})
    assert [(q, g.column("i").to_pylist()) for q, g in qid_groups(table)] == [
        ("q2", [0, 2]), ("q1", [1]), ("q3", [3])]


def test_qid_groups_of_a_many_chunk_table_match_the_combined_table():
    """Retrieval outputs are concatenations (many chunks): grouping must not depend on chunking."""
    parts = [pa.table({"qid": [f"q{(c * 7 + i) % 5}" for i in range(6)], "i": list(range(c * 6, c * 6 + 6))})
             for c in range(4)]
    chunked = pa.concat_tables(parts)
    assert chunked.column("qid").num_chunks == 4
    combined = [(q, g.to_pydict()) for q, g in qid_groups(chunked.combine_chunks())]
    assert [(q, g.to_pydict()) for q, g in qid_groups(chunked)] == combined
    assert [q for q, _ in combined] == ["q0", "q1", "q2", "q3", "q4"]
    assert all(g["i"] == sorted(g["i"]) and set(g["qid"]) == {q} for q, g in combined)
    assert sum(len(g["i"]) for _, g in combined) == 24
    grouped = pa.table({"qid": ["a", "a", "b"], "i": [0, 1, 2]})  # already in group order: slices of the input
    assert [g.column("i").to_pylist() for _, g in qid_groups(grouped)] == [[0, 1], [2]]


def test_qid_groups_of_a_chunk_per_query_slice_one_chunk():
    """A step's output of one chunk per query (20,000 queries: 20,000 chunks) made each query's slice walk every
    chunk: `tessera run` sat silent for a minute before its first table."""
    table = pa.concat_tables([pa.table({"qid": [f"q{q}"] * 3, "i": [q] * 3}) for q in range(50)])
    assert table.column("qid").num_chunks == 50
    grouped, qids, _ = group_by_qid(table)
    assert {grouped.column(c).num_chunks for c in ("qid", "i")} == {1}
    assert [(q, g.column("i").to_pylist()) for q, g in qid_groups(table)] == [(f"q{q}", [q] * 3) for q in range(50)]


def test_missing_columns_error_names_operator_and_columns():
    op = create("analyze.word_count", {"input_column": "body"}, step_id="wc")
    with pytest.raises(MissingColumnsError) as err:
        op(pa.table({"text": ["a"], "docno": ["d1"]}))
    assert err.value.step == "wc" and err.value.op == "analyze.word_count"
    # plain lists, as a web page's user reads them: Python's ['body'] and ['text', 'docno'] were shown before
    assert err.value.message == "missing input column(s) body; input has text, docno", err.value.message
    require_columns(pa.table({"a": [1]}), ["a"])


def test_query_rows_keep_a_querys_own_columns_and_leave_its_documents():
    """A retriever given results makes its queries of their first rows: each step's score_/rank_ and any column that
    differs within a query belong to documents, which the first row lent every new hit (bm25's best rank_bm25)."""
    results = pa.table({
        "qid": ["q1", "q1", "q2", "q1", "q2"], "query": ["bees", "bees", "cats", "bees", "cats"],
        "session": ["s1", "s1", "s2", "s1", "s2"], "messages": [["hi"], ["hi"], [], ["hi"], []],
        "docno": ["a", "b", "c", "d", "e"], "lang": ["en", "de", "en", "en", "en"],
        "tags": [["x"], ["y"], ["z"], ["x"], ["z"]], "rank_bm25": pa.array([1, 2, 1, 3, 2], pa.int32()),
        "score_bm25": [3.0, 2.0, 5.0, 1.0, 4.0], "year": pa.array([2001, None, 1999, 2001, 1999])})
    queries = query_rows(results, owned=["docno"])
    assert queries.to_pylist() == [{"qid": "q1", "query": "bees", "session": "s1", "messages": ["hi"]},
                                   {"qid": "q2", "query": "cats", "session": "s2", "messages": []}]
    one_row_each = results.slice(1, 2)  # one row a query: nothing differs within one, but a ranking is a document's
    assert query_rows(one_row_each).column_names == ["qid", "query", "session", "messages", "docno", "lang", "tags",
                                                     "year"]


def test_a_retriever_after_another_gives_its_hits_no_ranking_of_the_first():
    first = create("retrieve.corpus_bm25", {"k": 10}, step_id="first")
    second = create("retrieve.corpus_bm25", {"k": 3, "index_title": False}, step_id="second")
    out = second(first(pa.table({"qid": ["1", "2"], "query": ["honey bees", "gothic cathedrals"]})))
    assert out.num_rows == 6 and not [c for c in out.column_names if c.endswith("_first")]
    assert out.column("rank_second").to_pylist() == [1, 2, 3, 1, 2, 3]
