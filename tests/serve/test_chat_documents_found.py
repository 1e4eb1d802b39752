"""A flow's chat reply says how many documents the flow found for the question (``documents``): 0 for an answer
written from the question alone (``answer_only``, the no-retrieval baseline), so a client does not read its empty
``sources`` as an answer that cited none of the documents it was given (the web UI said "no sources cited" under
it). A real local run of the answer step, the model the fault server's."""

from __future__ import annotations

import pyarrow as pa

from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from operators.testing import sample_results


def test_a_reply_says_how_many_documents_the_flow_found(fault_models):
    from serve.chat.chat_flows import _message

    closed_book = FlowSpec.parse({"name": "closed", "steps": {
        "answer": {"op": "generate.answer", "params": {"model": "fault-ok", "context_column": None}}}})
    fault_models.reply = "Honey."
    question = pa.table({"qid": ["q1"], "query": ["what do bees make"]})
    reply = _message(LocalExecutor().run(closed_book, question), "q1")["message"]
    assert reply["sources"] == [] and reply["documents"] == 0

    grounded = FlowSpec.parse({"name": "grounded", "steps": {
        "context": {"op": "generate.context"}, "answer": {"op": "generate.answer", "params": {"model": "fault-ok"}}}})
    fault_models.reply = "Honey bees make honey [1]."
    reply = _message(LocalExecutor().run(grounded, sample_results(1, 3)), "q1")["message"]
    assert reply["sources"] and reply["documents"] == 3
