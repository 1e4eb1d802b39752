"""summarize.documents: the contract on the fault server, a real summary from the embedded model, summarize_prompt
as the prompt override, the degrade policy per row, and the cache rule."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.errors import OperatorError, ParamsError
from operators.llm.testing import SLOW_TIMEOUT_S
from operators.registry import create, get_operator
from operators.testing import OperatorContract, sample_results


class TestDocumentSummarizerContract(OperatorContract):
    operator_name = "summarize.documents"

    @pytest.fixture(autouse=True)
    def _fault_models(self, fault_models):
        self.server = fault_models

    def make_operator(self, **params):
        return get_operator(self.operator_name)({"model": "fault-ok", **params}, step_id="sum")


def test_every_row_gets_a_summary_and_its_usage(fault_models):
    fault_models.reply = "Bees make honey."
    op = create("llm_summarizer", {"model": "fault-ok"}, step_id="sum")
    table = sample_results(2, 3)
    out = op(table)
    assert out.drop_columns(["summary", "summary_finish_reason", "summary_cut"]).equals(table)
    assert out.column("summary").to_pylist() == ["Bees make honey."] * 6
    assert out.column("summary_finish_reason").to_pylist() == ["stop"] * 6 and out.column("summary_cut").null_count == 6
    meta = op.drain_metadata()
    assert {q: m["usage"]["sum"]["calls"] for q, m in meta.items()} == {"q1": 3, "q2": 3}
    assert meta["q1"]["usage"]["sum"]["completion_tokens"] == 9 and "degraded" not in meta["q1"]
    assert op.drain_usage()["llm_calls"] == 6 and fault_models.attempts["ok"] == 6


def test_summarize_prompt_is_the_instruction_before_the_text(fault_models):
    op = create("DocumentSummarizerStep", {"model": "fault-ok", "summarize_prompt": "summarize {briefly}: ",
                                           "input_column": "title", "output_column": "short"})
    out = op(sample_results(1, 1))
    title = sample_results(1, 1).column("title")[0].as_py()
    assert fault_models.bodies[0]["messages"][-1]["content"] == f"summarize {{briefly}}:\n\n{title}"
    assert out.column("short").to_pylist() == [fault_models.reply] and op.produces() == {
        "short": "text", "short_finish_reason": "data", "short_cut": "data"}
    with pytest.raises(ParamsError, match="summarize_prompt"):
        create("summarize.documents", {"summarize_prompt": "Sum up: ", "prompt": "{text}"})
    with pytest.raises(ParamsError, match="may use"):
        create("summarize.documents", {"prompt": "{document}"})


def test_empty_texts_are_not_sent(fault_models):
    table = pa.table({"qid": ["q1", "q1"], "query": ["bees", "bees"], "docno": ["a", "b"], "text": ["", None]})
    out = create("summarize.documents", {"model": "fault-ok"})(table)
    assert out.column("summary").to_pylist() == ["", None] and fault_models.attempts["ok"] == 0


@pytest.mark.parametrize("model, reason", [("fault-error", "api"), ("fault-slow", "timeout"),
                                           ("fault-junk", "no usable text")])
def test_a_failed_row_keeps_its_input_and_marks_the_query_degraded(fault_models, model, reason):
    op = create("summarize.documents", {"model": model, "timeout": SLOW_TIMEOUT_S if model == "fault-slow" else 0.5,
                                        "num_retries": 0}, step_id="sum")
    table = sample_results(1, 2)
    out = op(table)
    assert out.column("summary").to_pylist() == table.column("text").to_pylist()
    degraded = op.drain_metadata()["q1"]["degraded"]
    assert degraded["step"] == "sum" and reason in degraded["reason"]
    assert table.column("docno")[0].as_py() in degraded["reason"] and degraded["failures"] == 2  # both rows


def test_on_error_error_fails_the_step(fault_models):
    with pytest.raises(OperatorError, match="query 'q1'"):
        create("summarize.documents", {"model": "fault-error", "num_retries": 0, "on_error": "error"})(
            sample_results(1, 1))


@pytest.mark.integration
def test_the_embedded_model_summarises_a_row():
    table = sample_results(1, 1)
    text = table.column("text")[0].as_py()[:300]
    table = table.set_column(table.column_names.index("text"), "text", pa.array([text]))
    op = create("summarize.documents", {"model": "local", "max_tokens": 8, "timeout": 120}, step_id="sum")
    out = op(table)
    meta = op.drain_metadata()["q1"]
    summary = out.column("summary")[0].as_py()
    assert "degraded" not in meta and summary.strip() and summary != table.column("text")[0].as_py()
    assert meta["usage"]["sum"]["calls"] == 1 and 0 < meta["usage"]["sum"]["completion_tokens"] <= 8


def _spec(temperature: float, model: str = "fault-ok"):
    from flows.spec import FlowSpec

    return FlowSpec.parse({"name": "summaries", "steps": {"sum": {"op": "summarize.documents", "params": {
        "model": model, "temperature": temperature, "num_retries": 0}}}})


def test_cached_at_temperature_zero_never_above_and_never_when_degraded(fault_models, cache):
    from flows.executors.local import LocalExecutor

    table = sample_results(2, 2)
    first = LocalExecutor(cache=cache).run(_spec(0.0), table)
    again = LocalExecutor(cache=cache).run(_spec(0.0), table)
    assert fault_models.attempts["ok"] == 4 and again.steps["sum"].hits == 2 and again.steps["sum"].usage == {}
    assert again.table.column("summary").equals(first.table.column("summary"))
    assert again.metadata["q1"]["usage"]["sum"]["calls"] == 2  # what the summaries cost, replayed with them
    LocalExecutor(cache=cache).run(_spec(0.7), table)
    assert fault_models.attempts["ok"] == 8
    for _ in range(2):
        failed = LocalExecutor(cache=cache).run(_spec(0.0, "fault-error"), table)
    assert failed.metadata["q1"]["degraded"]["step"] == "sum" and fault_models.attempts["error"] == 8


LOOPS = ["Bees make honey.\n" * 6,  # the same line over and over
         "Bees make honey from nectar they gather. " + "and the bees and the honey " * 12,  # after a sound start
         "Bees make honey. Bees make honey. Bees make honey."]  # a short loop: too few words for the four-word runs


@pytest.mark.parametrize("reply", LOOPS)
def test_a_summary_that_loops_keeps_the_input_and_marks_the_query_degraded(fault_models, reply):
    """The same check as generate.answer's (``repetition``): a looping summary was kept as the row's summary."""
    fault_models.reply = reply
    op = create("summarize.documents", {"model": "fault-ok"}, step_id="sum")
    table = sample_results(1, 1)
    out = op(table)
    assert out.column("summary").to_pylist() == table.column("text").to_pylist()
    degraded = op.drain_metadata()["q1"]["degraded"]
    assert degraded["step"] == "sum" and "the reply repeats itself" in degraded["reason"]


@pytest.mark.parametrize("reply, summary, cut", [
    ("Bees make honey from nectar. Dr. Smith keeps them in hives. They also pollin",
     "Bees make honey from nectar. Dr. Smith keeps them in hives.", "trimmed to its last whole sentence"),
    ("Bees make honey from the nectar of", "Bees make honey from the nectar of", "no whole sentence: kept as written"),
    ("Bees make honey from nectar.", "Bees make honey from nectar.", None),  # cut right after a whole sentence
    # a list item's number is no sentence: the summary was trimmed to "1." or to "...honey. 2."
    ("1. Honey bees are insects that make", "1. Honey bees are insects that make", "no whole sentence"),
    ("Summary: 1. Bees make honey and", "Summary: 1. Bees make honey and", "no whole sentence"),
    ("Bees make honey. 2. Wasps", "Bees make honey.", "trimmed to its last whole sentence"),
    ("Bees make honey. 2.", "Bees make honey.", "trimmed to its last whole sentence"),
    ("Bees make honey. See item a)", "Bees make honey.", "trimmed to its last whole sentence"),
    # Chinese and Japanese sentences end at 。！？ with no space after: such a summary was kept whole, "no whole
    # sentence", and one that ended at its 。 was said to be cut
    ("蜜蜂用花蜜酿造蜂蜜。养蜂人把它们养在蜂箱里！它们还能为", "蜜蜂用花蜜酿造蜂蜜。养蜂人把它们养在蜂箱里！",
     "trimmed to its last whole sentence"),
    ("ミツバチは「花の蜜」から蜂蜜を作る。「巣箱で飼われる。」また",
     "ミツバチは「花の蜜」から蜂蜜を作る。「巣箱で飼われる。」", "trimmed to its last whole sentence"),
    ("蜜蜂用花蜜酿造蜂蜜。", "蜜蜂用花蜜酿造蜂蜜。", None)])
def test_a_summary_cut_at_max_tokens_is_trimmed_to_its_last_whole_sentence(fault_models, reply, summary, cut):
    """A reply the model stopped at max_tokens ended mid-sentence, with no record of it: its finish reason is now in
    a column (as generate.answer's finish_reason), and the summary is kept, trimmed to its last whole sentence."""
    fault_models.reply = reply
    op = create("summarize.documents", {"model": "fault-length"}, step_id="sum")
    out = op(sample_results(1, 1)).to_pylist()[0]
    assert out["summary"] == summary and out["summary_finish_reason"] == "length"
    assert (out["summary_cut"] is None) if cut is None else cut in out["summary_cut"]
    assert "degraded" not in op.drain_metadata()["q1"]
