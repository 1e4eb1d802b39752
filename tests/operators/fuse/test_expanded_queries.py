"""fuse.expanded_queries: extra queries' rankings merged per original query with RRF (fuse.rrf's code)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators import create
from operators.testing import OperatorContract, sample_results


class TestExpandedQueriesContract(OperatorContract):
    operator_name = "fuse.expanded_queries"

    def make_input(self, n_queries: int = 3, per_query: int = 5):
        table = sample_results(n_queries, per_query)
        return table.append_column("original_qid", table.column("qid"))


def hits(rows):
    table = pa.Table.from_pylist([dict(zip(("qid", "original_qid", "query", "docno", "rank"), r)) for r in rows])
    return table.set_column(4, "rank", table.column("rank").cast(pa.int32()))


def test_rrf_per_original_query():
    table = hits([("q1", "q1", "bees", "a", 1), ("q1", "q1", "bees", "b", 2),
                  ("q1#1", "q1", "honey bees", "b", 1), ("q1#1", "q1", "honey bees", "c", 2),
                  ("q2", "q2", "opera", "x", 1), ("q2#1", "q2", "nineteenth century opera", "y", 1)])
    out = create("fuse.expanded_queries", {"k": 60}, step_id="m")(table)
    rows = [(r["qid"], r["query"], r["docno"], r["rank"]) for r in out.to_pylist()]
    assert rows == [("q1", "bees", "b", 1), ("q1", "bees", "a", 2), ("q1", "bees", "c", 3),
                    ("q2", "opera", "x", 1), ("q2", "opera", "y", 2)]     # x, y tie: docno order
    score = {r["docno"]: r["score_m"] for r in out.to_pylist()}
    assert score["b"] == pytest.approx(1 / 62 + 1 / 61) and score["a"] == pytest.approx(1 / 61)
    assert not [c for c in out.column_names if c.startswith("rank_m_")]


def test_expansion_weight_and_an_original_that_found_nothing():
    table = hits([("q1", "q1", "bees", "a", 1), ("q1#1", "q1", "honey", "c", 1), ("q3#1", "q3", "x y", "z", 1)])
    out = create("fuse.expanded_queries", {"expansion_weight": 2.0}, step_id="m")(table)
    assert [(r["qid"], r["docno"]) for r in out.to_pylist()] == [("q1", "c"), ("q1", "a"), ("q3", "z")]
    assert create("fuse.expanded_queries")(table.slice(0, 0)).num_rows == 0
