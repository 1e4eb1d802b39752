"""A question whose search finds nothing (a filter that matches no document, words that no document holds) is
declined as ``min_relevance`` declines one: the no-answer text, ``abstained``, ``documents: 0``, no model call. It had
no answer record at all: ``tessera run`` printed "no results" and nothing else, ``--json`` and ``Flow.run`` gave no
metadata for it. The record is the answer step's (``Operator.no_rows_metadata``), written by the driver from the
queries the step's batches held, so both executors give it, beside the queries the step did see. Real runs over the
ingested sample index; the answer model is never called."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.integration

NO_ANSWER = "The documents found do not answer this question."
NOTHING = {"field": "title", "eq": "Nonexistent"}  # no document of the sample has this title


def test_a_question_the_search_found_nothing_for_is_declined_on_both_executors(sample_index, executor_kind):
    """q1 reaches the answer step (its rows, declined there by a gate no BM25 score reaches); q2's words are in no
    document, so no row of it does: the driver's record must not replace q1's, and must give q2 one."""
    from flows.api import Flow

    flow = Flow.load({"name": "declines", "steps": {
        "bm25": {"op": "retrieve.bm25", "params": {"k": 3}},
        "context": {"op": "generate.context"},
        "answer": {"op": "generate.answer", "params": {"model": "local", "min_relevance": 1000.0,
                                                       "relevance_column": "score_bm25"}},
        "references": {"op": "generate.references"}}}, index=str(sample_index))
    result = flow.run({"q1": "Which insects make honey?", "q2": "xyzzy qwertyuiop"}, executor=executor_kind,
                      keep_history=False)
    assert set(result.table.column("qid").to_pylist()) == {"q1"}
    found, nothing = result.metadata["q1"], result.metadata["q2"]
    assert found["abstained"] is True and found["relevance"] > 0 and "documents" not in found
    assert nothing == {"answer": NO_ANSWER, "reasoning": "", "sources": [], "sources_from": "none",
                       "abstained": True, "answer_cut": False, "relevance": None, "documents": 0}
    assert not result.steps["answer"].usage.get("llm_calls")  # nobody asked the model


def test_rag_on_the_command_line_declines_a_question_filtered_to_nothing(sample_index, run_cli):
    """The brief's case: the built-in rag flow with both retrievers filtered to nothing."""
    args = ("run", "rag", "--index", str(sample_index), "--queries", "Which insects make honey?", "--no-cache",
            "--set", f"bm25.filter={json.dumps(NOTHING)}", "--set", f"dense.filter={json.dumps(NOTHING)}")
    status, out = run_cli(*args)
    text = " ".join(out.split())
    assert status == 0 and "1: Which insects make honey? no results" in text, out
    assert f"answer: {NO_ANSWER}" in text and "the search found no document for this question" in text, out
    assert "min_relevance" not in text and "relevance:" not in text, out
    status, out = run_cli(*args, "--json")
    meta = json.loads(out)["metadata"]["1"]
    assert status == 0 and meta["answer"] == NO_ANSWER and meta["abstained"] is True and meta["documents"] == 0
    assert "usage" not in meta and json.loads(out)["rows"] == []
