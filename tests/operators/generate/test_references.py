"""generate.references: numbered citations of the cited rows, by kind of source."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.registry import create
from operators.testing import OperatorContract, sample_results


def answered(table: pa.Table, cited: list[bool]) -> pa.Table:
    table = create("generate.context")(table)
    return table.append_column("cited", pa.array(cited))


class TestReferencesContract(OperatorContract):
    operator_name = "generate.references"

    def make_input(self, n_queries=3, per_query=5):
        table = sample_results(n_queries, per_query)
        return answered(table, [i % 2 == 0 for i in range(table.num_rows)])


def test_the_cited_rows_numbered_as_in_the_answer():
    table = answered(sample_results(1, 3), [False, True, True])
    op = create("generate.references")
    out = op(table)
    titles, docnos = table.column("title").to_pylist(), table.column("docno").to_pylist()
    expected = [f"[2] {titles[1]} ({docnos[1]})", f"[3] {titles[2]} ({docnos[2]})"]
    assert op.drain_metadata()["q1"]["references"] == expected
    assert out.column("reference").to_pylist() == [None, *expected]
    every = create("generate.references", {"only_cited": False})
    every(table)
    assert len(every.drain_metadata()["q1"]["references"]) == 3


@pytest.mark.parametrize("extra, expected", [
    ({"url": "https://example.org/bee", "snippet": "Bees  make honey."},
     '[1] Bee. https://example.org/bee (search result: "Bees make honey.")'),
    ({"url": "https://example.org/bee"}, "[1] Bee. https://example.org/bee"),
    ({"path": "papers/bee.pdf", "page": 4}, "[1] Bee (PDF, papers/bee.pdf, p. 4)"),
    ({"path": "docs/bee.md"}, "[1] Bee (docs/bee.md)"),
    ({}, "[1] Bee (d1)"),
])
def test_each_kind_of_source(extra, expected):
    row = {"qid": "q1", "query": "bees", "docno": "d1", "title": "Bee", "text": "t", "rank": 1,
           "context_index": 1, "cited": True, **extra}
    op = create("generate.references")
    op(pa.Table.from_pylist([row]))
    assert op.drain_metadata()["q1"]["references"] == [expected]
