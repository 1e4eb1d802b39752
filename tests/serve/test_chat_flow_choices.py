"""OpenAI's ``n`` for a flow: ``n`` choices, each its own answer written by the embedded model from one search's
documents, with the references it cites; the usage summed over them; streamed, each event naming its choice's
``index``, as OpenAI streams ``n`` choices. It was a 422 ("a flow answers once"), where served models took up to 8.
A real ``Service`` with a real BM25 index and the real embedded model (SmolLM2, llama.cpp, in-process), asked by the
unmodified ``openai`` client over uvicorn on localhost (the chat routes of ``chat_app``); no Ray."""

from __future__ import annotations

import openai
import pytest
from flows import store as flow_store

from tests.serve.conftest import api_on_localhost, chat_app, two_document_index

QUESTION = [{"role": "user", "content": "What do honey bees make?"}]
#: A flow that searches, answers with the embedded model and lists the references each answer cites.
RAG = {"steps": {
    "bm25": {"op": "retrieve.bm25", "params": {"k": 2}},
    "context": {"op": "generate.context"},
    "answer": {"op": "generate.answer", "params": {"model": "local", "max_tokens": 12}},
    "references": {"op": "generate.references", "params": {"only_cited": False}}}}


pytestmark = pytest.mark.integration  # the embedded model writes the answers


@pytest.fixture
def client(tmp_path, monkeypatch):
    from flows.spec import FlowSpec
    from serve.service import Service
    from serve.service_settings import ServiceArgs, resolve

    home = tmp_path / "home"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    two_document_index(home / "indices" / "news")
    args = ServiceArgs(default_index=str(home / "indices" / "news"), task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    Service(resolve(args, environ={}), [], "tessera").warming.join(timeout=120)
    flow_store.save("smallrag", FlowSpec.parse(RAG))
    with api_on_localhost(app=chat_app()) as base:
        yield openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=600)


def test_n_choices_are_n_answers_from_one_search_with_their_usage_summed(client, slow_rerank):
    """The search (and a reranker's request, to a real HTTP server on localhost) runs once for the n answers."""
    from flows.spec import FlowSpec

    slow_rerank.seconds = 0
    reranked = {"bm25": RAG["steps"]["bm25"],
                "rerank": {"op": "rerank.api", "params": {"url": slow_rerank.url, "n": 2, "max_retries": 0}},
                **{step: RAG["steps"][step] for step in ("context", "answer", "references")}}
    flow_store.save("reranked", FlowSpec.parse({"steps": reranked}))
    asked = {"model": "reranked", "messages": QUESTION, "temperature": 1.0}
    one = client.chat.completions.create(**asked)
    three = client.chat.completions.create(**asked, n=3)
    assert len(slow_rerank.times) == 2  # one request for each chat, none per choice
    assert [choice.index for choice in three.choices] == [0, 1, 2]
    for choice in three.choices:
        answer, _, listed = choice.message.content.partition("\n\nSources:\n")
        assert answer.strip() and choice.finish_reason in ("stop", "length")
        sources = choice.message.model_extra["sources"]
        assert listed.splitlines() == [s["reference"] for s in sources]  # its own references, none of another's
        assert {s["docno"] for s in sources} == {s["docno"] for s in one.choices[0].message.model_extra["sources"]}
        assert choice.message.model_extra["documents"] == one.choices[0].message.model_extra["documents"] > 0
    # three answers' tokens: each prompt is the one-choice prompt, so the prompts count three times
    assert three.usage.prompt_tokens == 3 * one.usage.prompt_tokens
    assert three.usage.completion_tokens >= 3 and three.usage.total_tokens == \
        three.usage.prompt_tokens + three.usage.completion_tokens


def test_streamed_choices_name_their_index_and_end_each_with_its_sources(client):
    chunks = list(client.chat.completions.create(model="smallrag", messages=QUESTION, n=2, temperature=0, stream=True,
                                                 stream_options={"include_usage": True}))
    content = {0: "", 1: ""}
    finished = {}
    for chunk in chunks[:-1]:
        (choice,) = chunk.choices
        content[choice.index] += choice.delta.content or ""
        if choice.finish_reason:
            finished[choice.index] = choice.delta.model_extra["sources"]
    assert set(finished) == {0, 1} and all(finished.values())
    assert content[0] == content[1] and content[0].strip()  # temperature 0: the same answer twice
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    whole = client.chat.completions.create(model="smallrag", messages=QUESTION, n=2, temperature=0)
    assert [choice.message.content for choice in whole.choices] == [content[0], content[1]]
    assert chunks[-1].usage.total_tokens == whole.usage.total_tokens


def test_n_for_a_flow_whose_steps_after_the_answer_read_a_step_before_it_is_a_422_saying_why(client):
    """Such a flow cannot answer n times from one search; the refusal names the step, before anything runs."""
    spec = {"steps": {**RAG["steps"], "references": {"op": "generate.references", "inputs": ["answer", "context"]}}}
    from flows.spec import FlowSpec

    flow_store.save("joined", FlowSpec.parse(spec))
    with pytest.raises(openai.UnprocessableEntityError) as err:
        client.chat.completions.create(model="joined", messages=QUESTION, n=2)
    assert (err.value.body["param"], err.value.body["code"]) == ("n", "unsupported_parameter")
    assert "its step 'references' after the answer reads 'context', a step before it" in err.value.message
    assert "send n: 1" in err.value.message


def test_a_question_the_search_finds_nothing_for_is_declined_in_every_choice(client):
    """No row reaches the answer step: each choice is the decline one choice gets, not "No answer could be written
    (the search found no document ...)", which the n copies of no rows gave, the answer step never seeing them."""
    nothing = {"extra_body": {"params": {"bm25.filter": {"field": "title", "eq": "Nonexistent"}}}}
    one = client.chat.completions.create(model="smallrag", messages=QUESTION, **nothing).choices[0].message
    two = client.chat.completions.create(model="smallrag", messages=QUESTION, n=2, **nothing)
    assert one.content == "The documents found do not answer this question." and one.model_extra["abstained"]
    assert [(c.message.content, c.message.model_extra) for c in two.choices] == [(one.content, one.model_extra)] * 2
    assert two.usage.total_tokens == 0


def _answers(client, n: int = 1, **asked) -> list[str]:
    reply = client.chat.completions.create(model="smallrag", messages=QUESTION, temperature=1.5, max_tokens=24, n=n,
                                           **asked)
    return [choice.message.content for choice in reply.choices]


def test_a_seed_makes_a_flow_s_sampled_answer_the_same_each_time(client):
    """OpenAI's seed was taken and dropped: each answer sampled above temperature 0 drew a fresh seed, so a client
    could not ask for the same answer again, as it can of a served model."""
    first = _answers(client, seed=7)
    assert _answers(client, seed=7) == first and first[0].strip()
    assert _answers(client, seed=8) != first  # another seed, another sample


def test_n_seeded_choices_are_each_their_own_and_the_same_again(client):
    """Choice i samples with seed + i, as a served model's choices do: not n copies of the first choice's answer."""
    three = _answers(client, n=3, seed=7)
    assert len(set(three)) == 3
    assert _answers(client, n=3, seed=7) == three
    assert three[:2] == _answers(client, seed=7) + _answers(client, seed=8)  # choice 1 is seed 8's answer
    streamed = ["", "", ""]
    for chunk in client.chat.completions.create(model="smallrag", messages=QUESTION, temperature=1.5, max_tokens=24,
                                                n=3, seed=7, stream=True):
        for choice in chunk.choices:
            streamed[choice.index] += choice.delta.content or ""
    assert streamed == three  # streamed, the same choices
