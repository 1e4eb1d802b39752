"""How executors cut a table into the batches an operator sees (flows.executors.base.scope_batches)."""

import pyarrow as pa

from flows.executors.base import query_batch_ends, scope_batches
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


def test_query_batch_ends_is_the_rule_both_executors_cut_by():
    assert query_batch_ends([6, 2, 5, 3, 4], 7) == [2, 4, 5]      # the batches of the first test above
    assert query_batch_ends([6, 2, 5, 3, 4], 1) == [1, 2, 3, 4, 5]  # a query never splits
    assert query_batch_ends([6, 2, 5, 3, 4], None) == [5]
    assert query_batch_ends([6, 2, 5, 3, 4], 100) == [5]
    assert query_batch_ends([], 7) == []


def test_the_ray_regroup_partitions_are_runs_of_those_batches():
    from flows.executors._ray_blocks import partition_cuts

    sizes = [1 + i % 4 for i in range(500)]
    batches = query_batch_ends(sizes, 5)[:-1]
    assert partition_cuts(sizes, 5, max_partitions=1000) == batches
    thinned = partition_cuts(sizes, 5, max_partitions=16)
    assert len(thinned) == 15 and set(thinned) <= set(batches) and thinned == sorted(set(thinned))
    assert partition_cuts(sizes, None) == []
