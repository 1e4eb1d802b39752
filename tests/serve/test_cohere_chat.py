"""Cohere's chat API on the package's Serve app, with the real client (``cohere.ClientV2``): a flow's answer with its
sources as citations, streamed in Cohere's events as the model writes it; a served language model, streamed and
not; answers from documents sent with the request; bodies it cannot serve are 4xx naming the field."""

from __future__ import annotations

import pytest
import requests

pytestmark = pytest.mark.ray

QUESTION = [{"role": "user", "content": "Which insects make honey?"}]
SENTENCES = {"steps": {  # an answer in sentences, with [1] citations (rag's is a short span)
    "bm25": {"op": "retrieve.bm25", "params": {"k": 3}},
    "context": {"op": "generate.context", "params": {"max_context_length": 320}},
    "answer": {"op": "generate.answer", "params": {"max_tokens": 40}},
    "references": {"op": "generate.references"},
}}


@pytest.fixture(scope="module")
def client(serve_app):
    import cohere

    return cohere.ClientV2(api_key="x", base_url=serve_app, timeout=600)


@pytest.mark.slow
def test_a_flow_answers_with_its_sources_as_citations(client, serve_app):
    done = client.chat(model="rag", messages=QUESTION, temperature=0, max_tokens=48)
    assert done.finish_reason in ("COMPLETE", "MAX_TOKENS") and done.id
    text = done.message.content[0].text
    openai = requests.post(f"{serve_app}/v1/chat/completions", json={"model": "rag", "messages": QUESTION,
                                                                    "max_tokens": 48}, timeout=600).json()
    message = openai["choices"][0]["message"]
    sources = message["sources"]
    assert sources and message["content"] == text + "\n\nSources:\n" + "\n".join(s["reference"] for s in sources)
    [citation] = done.message.citations  # no [1] markers in a short answer: the whole answer, by its sources
    assert (citation.start, citation.end, citation.text) == (0, len(text), text)
    assert [s.id for s in citation.sources] == [s["docno"] for s in sources]
    assert citation.sources[0].document["reference"] == sources[0]["reference"]
    assert done.usage.tokens.output_tokens > 0 and done.usage.billed_units.input_tokens > 0
    quiet = client.chat(model="rag", messages=QUESTION, max_tokens=48, citation_options={"mode": "OFF"})
    assert quiet.message.citations is None and quiet.message.content[0].text == text
    assert client.chat(model="rag", messages=QUESTION, max_tokens=3).finish_reason == "MAX_TOKENS"


@pytest.mark.slow
def test_a_flow_streams_its_answer_then_its_citations(client, serve_app):
    assert requests.put(f"{serve_app}/flows/sentences_cohere", json=SENTENCES, timeout=60).status_code == 201
    whole = client.chat(model="sentences_cohere", messages=QUESTION, temperature=0)
    events = list(client.chat_stream(model="sentences_cohere", messages=QUESTION, temperature=0))
    kinds = [e.type for e in events]
    assert kinds[:2] == ["message-start", "content-start"] and kinds[-1] == "message-end"
    pieces = [e.delta.message.content.text for e in events if e.type == "content-delta"]
    text = whole.message.content[0].text
    assert "".join(pieces) == text and len(pieces) >= len(text.split()) - 2  # about a piece a word
    cited = [e.delta.message.citations for e in events if e.type == "citation-start"]
    assert kinds.count("citation-end") == len(cited) and cited
    assert [(c.start, c.end, [s.id for s in c.sources]) for c in cited] == [
        (c.start, c.end, [s.id for s in c.sources]) for c in whole.message.citations]
    assert all(text[c.start:c.end] == c.text for c in cited) and "[" in cited[0].text  # a [1] marker
    end = events[-1].delta
    assert end.finish_reason == whole.finish_reason
    assert end.usage.tokens.output_tokens == whole.usage.tokens.output_tokens


def test_a_served_model_streamed_and_not(client):
    done = client.chat(model="smollm2", messages=QUESTION, max_tokens=8, temperature=0)
    assert done.finish_reason in ("COMPLETE", "MAX_TOKENS") and done.message.citations is None
    events = list(client.chat_stream(model="smollm2", messages=QUESTION, max_tokens=8, temperature=0))
    pieces = [e.delta.message.content.text for e in events if e.type == "content-delta"]
    assert "".join(pieces) == done.message.content[0].text and len(pieces) > 1  # greedy: the same answer
    assert events[-1].delta.finish_reason == done.finish_reason
    assert events[-1].delta.usage.tokens.output_tokens == done.usage.tokens.output_tokens
    from cohere.core.api_error import ApiError as CohereApiError

    too_long = [{"role": "user", "content": "bee " * 5000}]  # over SmolLM2's 4,096 tokens
    for call in (client.chat, lambda **kw: list(client.chat_stream(**kw))):  # streamed too: a 400, not an event
        with pytest.raises(CohereApiError) as err:
            call(model="smollm2", messages=too_long, max_tokens=4)
        assert err.value.status_code == 400 and err.value.body["error"]["code"] == "context_length_exceeded"


def test_what_it_cannot_serve_is_a_422_naming_the_field(client, serve_app):
    import cohere

    with pytest.raises(cohere.UnprocessableEntityError) as err:
        client.chat(model="smollm2", messages=QUESTION, tools=[{"type": "function", "function": {"name": "f"}}])
    assert err.value.body["error"]["param"] == "tools"
    with pytest.raises(cohere.NotFoundError) as err:
        client.chat(model="no-such-model", messages=QUESTION)
    assert "rag" in err.value.body["error"]["message"]
    bad = requests.post(f"{serve_app}/v2/chat", json={"model": "rag", "messages": QUESTION, "p": 2}, timeout=60)
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "p"


FRUIT = [{"role": "user", "content": "What colour is the zorblat fruit?"}]
DOCUMENTS = [
    {"id": "fruit", "data": {"title": "Zorblat", "text": "The zorblat fruit is bright purple and tastes of pepper.",
                             "url": "https://example.org/zorblat"}},
    {"id": "tree", "data": {"title": "Zorblat tree", "snippet": "The zorblat tree grows on the island of Quarn."}},
    "Quarn is an island with cold winters.",
]


def served_requests() -> int:
    from ray import serve

    return serve.get_deployment_handle("smollm2", app_name="tessera").info.remote().result()["requests"]


@pytest.mark.slow
def test_documents_sent_with_the_request_ground_the_answer_and_its_citations(client, serve_app):
    """The documents take the place of the search, for a flow (rag, sentences_cohere) and for a served model; the
    citations name them as they were sent."""
    assert requests.put(f"{serve_app}/flows/sentences_cohere", json=SENTENCES, timeout=60).status_code == 201
    ids = ["fruit", "tree", "doc:2"]
    short = client.chat(model="rag", messages=FRUIT, documents=DOCUMENTS, temperature=0)
    text = short.message.content[0].text
    [whole] = short.message.citations  # rag's short answer, cited whole by the documents that hold it
    assert "purple" in text.lower() and whole.text == text
    assert [s.id for s in whole.sources] == ["fruit"]  # a document sent, not one of the sample index's
    assert whole.sources[0].document == {"id": "fruit", **DOCUMENTS[0]["data"]}  # as it was sent

    cited = client.chat(model="sentences_cohere", messages=FRUIT, documents=DOCUMENTS, temperature=0)
    assert cited.message.citations and {s.id for c in cited.message.citations for s in c.sources} <= set(ids)
    events = list(client.chat_stream(model="sentences_cohere", messages=FRUIT, documents=DOCUMENTS, temperature=0))
    streamed = [e.delta.message.citations for e in events if e.type == "citation-start"]
    assert [(c.start, [s.id for s in c.sources]) for c in streamed] == [
        (c.start, [s.id for s in c.sources]) for c in cited.message.citations]

    before = served_requests()
    model = client.chat(model="smollm2", messages=FRUIT, documents=DOCUMENTS, temperature=0, max_tokens=48)
    assert served_requests() == before + 1  # answered on the deployment, through the gateway alias 'local'
    assert model.message.content[0].text.strip()
    assert {s.id for c in model.message.citations or [] for s in c.sources} <= set(ids)


@pytest.mark.parametrize("change, status, param", [
    ({"index": "sample"}, 422, "index"),
    ({"documents": [{"id": "a", "data": {"text": "x"}}, {"id": "a", "data": {"text": "y"}}]}, 422, "documents.1.id"),
    ({"documents": [{"data": {"title": "", "text": " "}}]}, 422, "documents.0"),
    ({"documents": [{"text": "no data field"}]}, 422, "documents"),
    ({"documents": ["a document"] * 401}, 413, "documents"),
])
def test_bad_documents_are_4xx_naming_the_field(serve_app, change, status, param):
    body = {"model": "rag", "messages": FRUIT, "documents": DOCUMENTS, **change}
    bad = requests.post(f"{serve_app}/v2/chat", json=body, timeout=60)
    assert bad.status_code == status, bad.text
    assert bad.json()["error"]["param"].startswith(param)
