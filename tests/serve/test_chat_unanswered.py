"""A flow's chat reply that is no answer ("No answer could be written (...)") says so (``answered: false``, also in
the last event of a stream), so a client leaves it out of the conversation it sends back: the web UI's Chat tab sent
it, and the follow-up was searched for with that text in it. A real local run of the answer steps over a real results
table, the model the fault server's failing one. Such a reply lists no sources: the Chat tab and a task's chat showed
them under it, as if they supported it."""

from __future__ import annotations

from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from operators.testing import sample_results


def test_a_reply_the_flow_could_not_write_is_marked_unanswered(fault_models):
    from serve.chat.chat_flows import _message

    spec = FlowSpec.parse({"name": "answers", "steps": {
        "context": {"op": "generate.context"},
        "answer": {"op": "generate.answer", "params": {"model": "fault-error", "num_retries": 0}},
        "references": {"op": "generate.references", "params": {"only_cited": False}}}})
    table = sample_results(1, 3)
    failed = LocalExecutor().run(spec, table)
    reply = _message(failed, "q1")
    assert reply["answered"] is False and reply["message"]["answered"] is False
    assert reply["message"]["content"].startswith("No answer could be written (")
    # no numbered sources under it (the web UI listed them, as if they supported it)
    assert reply["message"]["sources"] == [] and "Sources:" not in reply["message"]["content"]
    assert failed.table.column("reference").to_pylist()  # the step listed them all the same
    fault_models.reply = "Honey bees make honey [1]."
    spec.steps["answer"].params["model"] = "fault-ok"
    answered = _message(LocalExecutor().run(spec, table), "q1")
    assert answered["answered"] is True and "answered" not in answered["message"]
    assert answered["message"]["sources"] and "\n\nSources:\n[1] " in answered["message"]["content"]


def test_a_reply_with_no_document_found_says_so(fault_models):
    """A chat over an empty index (or one filtered to nothing) said only "No answer could be written (the flow wrote
    no answer)": no document reached the answer step."""
    from serve.chat.chat_flows import _message

    spec = FlowSpec.parse({"name": "answers", "steps": {
        "context": {"op": "generate.context"}, "answer": {"op": "generate.answer", "params": {"model": "fault-ok"}}}})
    nothing = sample_results(1, 3).slice(0, 0)
    reply = _message(LocalExecutor().run(spec, nothing), "q1")
    assert reply["answered"] is False and reply["message"]["content"] == (
        "No answer could be written (the search found no document for it: is the index empty, or filtered to "
        "nothing?).")
