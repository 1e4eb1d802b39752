"""How executors cut a table into the batches an operator sees (flows.executors.base.scope_batches)."""

import pyarrow as pa

from flows.executors.base import scope_batches
from operators import create


def _interleaved_results() -> pa.Table:
    """Five queries, 2 to 6 rows each, interleaved across four chunks as a fan-in concatenation leaves them."""
    sizes = {"q0": 6, "q1": 2, "q2": 5, "q3": 3, "q4": 4}
    rows = [(qid, r) for r in range(6) for qid, n in sizes.items() if r < n]
    parts = [rows[i:i + 5] for i in range(0, len(rows), 5)]
    return pa.concat_tables(pa.table({"qid": [q for q, _ in part], "rank": [r + 1 for _, r in part]})
                            for part in parts)


def test_query_scope_batches_are_whole_queries_cut_as_one_slice_each():
    table = _interleaved_results()
    assert table.column("qid").num_chunks > 1
    batches = list(scope_batches(create("rerank.tfidf", {}), table, 7))
    assert [b.column("qid").to_pylist() for b in batches] == [
        ["q0"] * 6 + ["q1"] * 2, ["q2"] * 5 + ["q3"] * 3, ["q4"] * 4]
    assert all(b.column("qid").num_chunks == 1 for b in batches)  # one contiguous slice, not one chunk per query
    assert [b.column("rank").to_pylist()[:2] for b in batches] == [[1, 2], [1, 2], [1, 2]]  # input order kept
    assert sum(b.num_rows for b in batches) == table.num_rows


def test_a_query_larger_than_the_batch_size_is_one_batch_and_row_scope_cuts_anywhere():
    table = _interleaved_results()
    assert [b.num_rows for b in scope_batches(create("rerank.tfidf", {}), table, 1)] == [6, 2, 5, 3, 4]
    assert [b.num_rows for b in scope_batches(create("analyze.word_count", {}), table, 8)] == [8, 8, 4]
    assert [b.num_rows for b in scope_batches(create("rerank.tfidf", {}), table, None)] == [20]
    assert list(scope_batches(create("rerank.tfidf", {}), table.slice(0, 0), 7)) == []
