"""postprocess.filter: the contract, filtering result rows by metadata, ranks renumbered."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.errors import OperatorError, ParamsError
from operators.registry import create
from operators.testing import OperatorContract, sample_results


def with_metadata(table: pa.Table) -> pa.Table:
    n = table.num_rows
    return (table.append_column("year", pa.array([2000 + i % 4 for i in range(n)], pa.int64()))
                 .append_column("country", pa.array([["FR", "DE", "JP"][i % 3] for i in range(n)])))


class TestFilterContract(OperatorContract):
    operator_name = "postprocess.filter"

    def make_operator(self, **params):
        return create("postprocess.filter", {"filter": {"field": "year", "gte": 2001}, **params}, step_id="flt")

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return with_metadata(sample_results(n_queries, per_query))


def test_keeps_matching_rows_in_order_with_dense_ranks():
    table = with_metadata(sample_results(2, 6))
    out = create("postprocess.filter", {"filter": {"any": [{"country": "jp"}, {"field": "year", "eq": 2000}]}})(table)
    for row in out.to_pylist():
        assert row["country"] == "JP" or row["year"] == 2000
    expected = [r["docno"] for r in table.to_pylist() if r["country"] == "JP" or r["year"] == 2000]
    assert out.column("docno").to_pylist() == expected
    for qid in ("q1", "q2"):
        ranks = [r["rank"] for r in out.to_pylist() if r["qid"] == qid]
        assert ranks == list(range(1, len(ranks) + 1))


def test_errors_name_the_column_and_the_step():
    with pytest.raises(OperatorError) as err:
        create("postprocess.filter", {"filter": {"field": "yeer", "eq": 1}}, step_id="f")(
            with_metadata(sample_results(1, 2)))
    assert err.value.step == "f" and "yeer" in err.value.message and err.value.field == "params.filter"
    with pytest.raises(ParamsError) as err:
        create("postprocess.filter", {"filter": {"field": "year"}}, step_id="f")
    assert err.value.field.startswith("params.filter")
