"""generate.answer's min_relevance: a query whose passages are all far from the question gets the no-answer text
with no model call; the others are answered as before; the gate's column is checked before anything runs."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.errors import ParamsError
from operators.registry import create
from operators.tables import set_column
from operators.testing import sample_results


def scored(dense: list[float | None], per_query: int = 3) -> pa.Table:
    """sample_results with the context built and a ``score_dense`` column (``dense``: one value a row)."""
    table = create("generate.context", {"max_context_length": 400})(sample_results(len(dense) // per_query,
                                                                                     per_query))
    return set_column(table, "score_dense", pa.array(dense, pa.float64()))


def test_a_query_below_the_threshold_is_not_sent_to_the_model(fault_models):
    op = create("generate.answer", {"model": "fault-ok", "min_relevance": 0.45}, step_id="answer")
    out = op(scored([0.61, 0.30, None,  0.44, None, 0.12]))
    meta = op.drain_metadata()
    assert fault_models.attempts["ok"] == 1  # q1 only
    assert meta["q1"]["answer"] == "Honey bees make honey [1]." and "abstained" not in meta["q1"]
    assert meta["q1"]["relevance"] == pytest.approx(0.61)
    assert meta["q2"]["answer"] == "The documents found do not answer this question."
    assert meta["q2"]["abstained"] is True and meta["q2"]["sources"] == [] and meta["q2"]["sources_from"] == "none"
    assert meta["q2"]["relevance"] == pytest.approx(0.44) and "degraded" not in meta["q2"]
    assert out.num_rows == 6 and out.column("cited").to_pylist()[3:] == [False, False, False]


def test_rows_without_a_score_count_as_far_and_the_text_is_the_users(fault_models):
    """BM25 alone found them (fuse.rrf leaves score_dense null): nothing says they are about the question."""
    op = create("generate.answer", {"model": "fault-ok", "min_relevance": 0.2, "no_answer": "Not in the notes."},
                step_id="answer")
    op(scored([None, None, None]))
    meta = op.drain_metadata()["q1"]
    assert meta["answer"] == "Not in the notes." and meta["abstained"] and meta["relevance"] is None
    assert fault_models.attempts["ok"] == 0


def test_the_gate_needs_its_column_and_documents(fault_models):
    op = create("generate.answer", {"model": "fault-ok", "min_relevance": 0.4}, step_id="answer")
    assert "score_dense" in op.requires()
    with pytest.raises(Exception, match="score_dense"):
        op(create("generate.context", {"max_context_length": 400})(sample_results(1, 2)))
    with pytest.raises(ParamsError, match="min_relevance.*context_column: null"):
        create("generate.answer", {"model": "fault-ok", "min_relevance": 0.4, "context_column": None})
    assert "score_dense" not in create("generate.answer", {"model": "fault-ok"}).requires()
