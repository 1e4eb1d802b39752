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


def test_a_follow_ups_answer_is_read_against_the_question_as_asked(fault_models):
    """query.contextualize gives a follow-up its history form ("Is alcohol covered by it? (What is the daily meal
    allowance ...; 45 euros)"); the answer was read against it, so its words from the earlier turn counted as the
    question's: no source for an answer the expenses page holds, and the short answer not cut to its span."""
    import json

    docs = pa.table({"qid": ["1", "1"], "query": ["Is alcohol covered by it?"] * 2, "docno": ["exp#0", "leave#0"],
                     "text": ["Travel and expenses: the daily allowance is 45 euros; alcohol is not covered.",
                              "Leave policy: thirty days of annual leave, and sick leave on a doctor's note."],
                     "score": [2.0, 1.0], "rank": [1, 2],
                     "messages": [json.dumps([{"role": "user", "content": "What is the daily meal allowance?"},
                                              {"role": "assistant", "content": "45 euros"}])] * 2})
    table = create("query.contextualize", {})(docs)
    assert table.column("query")[0].as_py().startswith("Is alcohol covered by it? (What is the daily")
    table = create("generate.context", {"max_context_length": 400})(table)
    fault_models.reply = "No, alcohol is not covered by it. The daily allowance is 45 euros"
    op = create("generate.answer", {"model": "fault-ok", "style": "short"}, step_id="answer")
    op(table)
    meta = op.drain_metadata()["1"]
    assert meta["answer"] == "The daily allowance is 45 euros" and meta["sources"] == ["exp#0"], meta
