"""``FlowResult.description``: the run's summary line counts rows, queries and steps in the singular for one."""

from __future__ import annotations

from flows.result import FlowResult, StepRecord
from operators.testing import sample_results


def test_one_step_one_query_and_one_row_are_said_in_the_singular():
    """``tessera run`` printed "flow: 3 rows, 1 query, 1 steps in 0.41 s"."""
    table = sample_results(1, 1)
    result = FlowResult("bm25", table, steps={"bm25": StepRecord("bm25", "retrieve.bm25", rows_out=1)}, seconds=0.41)
    assert result.description() == "1 row, 1 query, 1 step in 0.41 s (local), cache off"


def test_several_are_said_in_the_plural():
    table = sample_results(2, 3)
    steps = {s: StepRecord(s, op) for s, op in (("bm25", "retrieve.bm25"), ("words", "analyze.word_count"))}
    result = FlowResult("bm25", table, steps=steps, metadata={"q1": {}, "q2": {}}, seconds=1.5)
    assert result.description(queries=3) == ("6 rows, 3 queries (1 with no results), 2 steps in 1.50 s (local), "
                                             "cache off")
    assert "metadata for 2 queries" in repr(result)
