"""summarize.results: one summary per query into its metadata, the documents the prompt gives, a real summary from
the embedded model, the degrade policy, and the cache rule."""

from __future__ import annotations

import pytest

from operators.llm.testing import SLOW_TIMEOUT_S
from operators.registry import create, get_operator
from operators.testing import OperatorContract, sample_results


class TestResultsSummarizerContract(OperatorContract):
    operator_name = "summarize.results"

    @pytest.fixture(autouse=True)
    def _fault_models(self, fault_models):
        self.server = fault_models

    def make_operator(self, **params):
        return get_operator(self.operator_name)({"model": "fault-ok", **params}, step_id="summary")


def test_one_summary_per_query_from_its_best_documents(fault_models):
    fault_models.reply = "  Bees make honey.  "
    op = create("ResultsSummarizerStep", {"model": "fault-ok", "max_documents": 2, "max_document_chars": 40},
                step_id="summary")
    table = sample_results(2, 3)
    shuffled = table.take([2, 1, 0, 5, 4, 3])  # rank order, not row order, decides which documents go in
    assert op(shuffled).equals(shuffled)
    meta = op.drain_metadata()
    assert {q: m["summary"] for q, m in meta.items()} == {"q1": "Bees make honey.", "q2": "Bees make honey."}
    assert meta["q1"]["summary_finish_reason"] == "stop" and "summary_cut" not in meta["q1"]
    assert meta["q1"]["usage"]["summary"]["calls"] == 1 and op.drain_usage()["llm_calls"] == 2
    rows = table.slice(0, 3).to_pylist()
    prompts = [body["messages"][-1]["content"] for body in fault_models.bodies]  # the calls run concurrently
    [prompt] = [p for p in prompts if p.startswith(f"Question: {rows[0]['query']}")]
    assert f"[1] {rows[0]['title']}\n" in prompt
    assert f"[2] {rows[1]['title']}\n" in prompt and "[3]" not in prompt and rows[2]["title"] not in prompt
    assert rows[0]["text"][:30] in prompt and rows[0]["text"][45:80] not in prompt


def test_the_summary_key_is_a_param(fault_models):
    op = create("summarize.results", {"model": "fault-ok", "output_key": "overview", "title_column": None})
    op(sample_results(1, 2))
    assert op.drain_metadata()["q1"]["overview"] == fault_models.reply
    assert "[1]\n" in fault_models.bodies[0]["messages"][-1]["content"]


@pytest.mark.parametrize("model, reason", [("fault-error", "api"), ("fault-slow", "timeout"),
                                           ("fault-junk", "no usable text")])
def test_a_failure_leaves_no_summary_and_marks_the_query_degraded(fault_models, model, reason):
    op = create("summarize.results", {"model": model, "timeout": SLOW_TIMEOUT_S if model == "fault-slow" else 0.5,
                                      "num_retries": 0}, step_id="summary")
    table = sample_results(1, 2)
    assert op(table).equals(table)
    meta = op.drain_metadata()["q1"]
    assert "summary" not in meta and meta["degraded"]["step"] == "summary" and reason in meta["degraded"]["reason"]


@pytest.mark.integration
def test_the_embedded_model_summarises_a_query():
    op = create("summarize.results", {"model": "local", "max_tokens": 8, "max_documents": 2,
                                      "max_document_chars": 150, "timeout": 120}, step_id="summary")
    op(sample_results(1, 3))
    meta = op.drain_metadata()["q1"]
    assert "degraded" not in meta and meta["summary"].strip()
    assert meta["usage"]["summary"]["calls"] == 1 and 0 < meta["usage"]["summary"]["completion_tokens"] <= 8


def test_cached_at_temperature_zero(fault_models, cache):
    from flows.executors.local import LocalExecutor
    from flows.spec import FlowSpec

    spec = FlowSpec.parse({"name": "s", "steps": {"summary": {"op": "summarize.results", "params": {
        "model": "fault-ok"}}}})
    first = LocalExecutor(cache=cache).run(spec, sample_results(2, 2))
    again = LocalExecutor(cache=cache).run(spec, sample_results(2, 2))
    assert fault_models.attempts["ok"] == 2 and again.steps["summary"].hits == 2
    assert again.metadata["q2"]["summary"] == first.metadata["q2"]["summary"] == fault_models.reply


@pytest.mark.parametrize("reply", ["Bees make honey.\n" * 6,
                                   "Bees make honey from nectar they gather. " + "and the bees and the honey " * 12,
                                   "Bees make honey. Bees make honey. Bees make honey.",  # too short for word runs
                                   "Bees make honey. Bees make wax. Bees make honey. Bees make wax. Bees make honey."])
def test_a_summary_that_loops_is_no_summary_and_marks_the_query_degraded(fault_models, reply):
    """The same check as generate.answer's (``repetition``): a looping summary was kept as the query's summary."""
    fault_models.reply = reply
    op = create("summarize.results", {"model": "fault-ok"}, step_id="summary")
    op(sample_results(1, 2))
    meta = op.drain_metadata()["q1"]
    assert "summary" not in meta and meta["degraded"]["step"] == "summary"
    assert "the reply repeats itself" in meta["degraded"]["reason"]


@pytest.mark.parametrize("reply", [
    "Bees make honey.",
    "Honey bees make honey from nectar [1]. Bumblebees make a little honey [2]. Stingless bees make honey too [3].",
    "Bees make honey. They store it in wax combs. Bees make honey mostly in summer.",  # a sentence twice is no loop
    "Bees make honey. Bees make wax. Bees make honey. Bees make wax.",
    "Dr. Smith keeps bees. Mr. Jones keeps bees. Ms. Lee keeps bees."])  # alike, not the same
def test_a_short_summary_that_does_not_loop_is_kept(fault_models, reply):
    fault_models.reply = reply
    op = create("summarize.results", {"model": "fault-ok"}, step_id="summary")
    op(sample_results(1, 2))
    meta = op.drain_metadata()["q1"]
    assert meta["summary"] == reply and "degraded" not in meta


def test_a_summary_cut_at_max_tokens_is_trimmed_and_says_so(fault_models):
    """The finish reason is in the query's metadata beside the summary (as generate.answer's finish_reason); a
    summary the model stopped at max_tokens mid-sentence is kept up to its last whole sentence."""
    fault_models.reply = "Bees make honey from nectar. They store it in combs. Bumblebees make a little of"
    op = create("summarize.results", {"model": "fault-length", "output_key": "overview"}, step_id="summary")
    op(sample_results(1, 2))
    meta = op.drain_metadata()["q1"]
    assert meta["overview"] == "Bees make honey from nectar. They store it in combs."
    assert meta["overview_finish_reason"] == "length" and "trimmed to its last whole sentence" in meta["overview_cut"]
    assert "degraded" not in meta
