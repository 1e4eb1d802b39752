"""Cohere's documents as a flow's rows and its answer path, without Ray (serve/chat/grounded.py); the route itself is
tested on the Serve app in test_cohere_chat.py."""

from __future__ import annotations

import pytest

from flows.spec import FlowSpec
from serve.http.errors import ApiError
from serve.chat.grounded import CohereDocument, answer_path, document_rows


def test_documents_become_rows_and_citations_show_them_as_sent():
    sent = ["Plain text.", CohereDocument(id="a", data={"title": "T", "snippet": "Snip.", "url": "https://x.org/a"}),
            CohereDocument(data={"author": "Ada", "year": 1843})]
    rows, shown = document_rows(sent)
    assert rows == [
        {"docno": "doc:0", "title": None, "text": "Plain text.", "url": None},
        {"docno": "a", "title": "T", "text": "Snip.", "url": "https://x.org/a"},
        {"docno": "doc:2", "title": None, "text": "author: Ada\nyear: 1843", "url": None},  # no text field: its fields
    ]
    assert shown == {"doc:0": {"id": "doc:0", "text": "Plain text."},
                     "a": {"id": "a", "title": "T", "snippet": "Snip.", "url": "https://x.org/a"},
                     "doc:2": {"id": "doc:2", "author": "Ada", "year": 1843}}


@pytest.mark.parametrize("sent, param", [
    ([CohereDocument(id="x", data={"text": "1"}), CohereDocument(id="x", data={"text": "2"})], "documents.1.id"),
    (["ok", "  "], "documents.1"),
    ([CohereDocument(data={"title": "only a title"})], "documents.0"),
    (["fine", CohereDocument(id="s", data={"text": "a lone \ud800 surrogate"})], "documents.1"),
])
def test_a_document_without_text_or_with_a_repeated_id_is_a_422_naming_it(sent, param):
    with pytest.raises(ApiError) as err:
        document_rows(sent)
    assert (err.value.status, err.value.param, err.value.code) == (422, param, "invalid_value")  # code was null


def test_a_flow_answers_from_documents_with_its_own_answer_steps():
    rag = FlowSpec.load("rag")
    path = answer_path(rag)
    assert list(path.steps) == ["context", "answer", "references"] and path.name == "rag_documents"
    for step_id in path.steps:  # style short, 24 tokens, two sentences; no gate on a search's score (none ran)
        gate = {"min_relevance": 0.45} if step_id == "answer" else {}
        assert {**path.steps[step_id].params, **gate} == rag.steps[step_id].params
    assert "min_relevance" not in path.steps["answer"].params
    assert path.steps["answer"].batch_size == rag.steps["answer"].batch_size
    bare = answer_path(FlowSpec.parse({"name": "bare", "steps": {"answer": {"op": "generate.answer"}}}))
    assert [s.op for s in bare.steps.values()] == ["generate.context", "generate.answer", "generate.references"]
    bare.build()  # a valid flow: context before the answer, references after
