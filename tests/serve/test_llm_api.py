"""/v1/chat/completions on the shared app's llama.cpp deployment, through the unmodified openai client and
through Tessera's own gateway (an alias whose api_base is the Serve URL)."""

from __future__ import annotations

import pytest
import requests

pytestmark = pytest.mark.ray

QUESTION = [{"role": "user", "content": "Name one insect that makes honey."}]


@pytest.fixture(scope="module")
def client(serve_app):
    from openai import OpenAI

    return OpenAI(base_url=f"{serve_app}/v1", api_key="unused", max_retries=0)


def test_openai_client_non_streaming_and_streaming_agree(client):
    done = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=16, temperature=0)
    text = done.choices[0].message.content
    assert done.model == "smollm2" and done.object == "chat.completion"
    assert text.strip() and done.usage.completion_tokens > 0 and done.usage.prompt_tokens > 5
    assert done.choices[0].finish_reason in ("stop", "length")

    stream = client.chat.completions.create(model="local", messages=QUESTION, max_tokens=16, temperature=0,
                                            stream=True)
    chunks = list(stream)
    assert len(chunks) > 3  # token by token, not one event
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == text  # greedy: same answer
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


def test_n_choices_are_the_replies_of_successive_seeds(client):
    """n: 2 with seed 7 writes what two requests with seeds 7 and 8 write, as choices 0 and 1, the prompt's tokens
    counted once and the completions' summed; streamed, the same texts under their indexes, in one stream."""
    sampled = {"model": "smollm2", "messages": QUESTION, "max_tokens": 6, "temperature": 1.0}
    both = client.chat.completions.create(n=2, seed=7, **sampled)
    alone = [client.chat.completions.create(seed=seed, **sampled) for seed in (7, 8)]
    assert [c.index for c in both.choices] == [0, 1]
    assert [c.message.content for c in both.choices] == [a.choices[0].message.content for a in alone]
    assert both.usage.prompt_tokens == alone[0].usage.prompt_tokens
    assert both.usage.completion_tokens == sum(a.usage.completion_tokens for a in alone)

    chunks = list(client.chat.completions.create(n=2, seed=7, stream=True, stream_options={"include_usage": True},
                                                 **sampled))
    texts = ["".join(c.choices[0].delta.content or "" for c in chunks if c.choices and c.choices[0].index == i)
             for i in (0, 1)]
    assert texts == [c.message.content for c in both.choices]
    assert len({c.id for c in chunks}) == 1 and chunks[-1].choices == []
    assert chunks[-1].usage.completion_tokens == both.usage.completion_tokens


@pytest.mark.slow  # long on its own (two answers of the embedded model / a whole app's logs)
def test_streamed_usage_matches_the_whole_answers(client, serve_app):
    """stream_options.include_usage: a last chunk with no choices and the usage the whole answer reports,
    through the openai client and through litellm (the gateway's library)."""
    import litellm

    for max_tokens in (4, 64):  # stopped by max_tokens, and (the answer is short) by the end-of-text token
        done = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=max_tokens,
                                              temperature=0)
        chunks = list(client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=max_tokens,
                                                     temperature=0, stream=True,
                                                     stream_options={"include_usage": True}))
        assert chunks[-1].choices == [] and chunks[-1].usage is not None
        assert (chunks[-1].usage.prompt_tokens, chunks[-1].usage.completion_tokens) == (
            done.usage.prompt_tokens, done.usage.completion_tokens), done.choices[0].finish_reason
        assert all(c.usage is None for c in chunks[:-1])
    plain = list(client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=4, stream=True))
    assert all(c.choices for c in plain)  # no usage chunk unless asked for
    streamed = litellm.completion(model="openai/smollm2", api_base=f"{serve_app}/v1", api_key="unused",
                                  messages=QUESTION, max_tokens=64, temperature=0, stream=True,
                                  stream_options={"include_usage": True})
    usage = [c.usage for c in streamed if getattr(c, "usage", None)]
    assert usage and usage[-1].completion_tokens == done.usage.completion_tokens


def test_sse_wire_format_ends_with_done(serve_app):
    response = requests.post(f"{serve_app}/v1/chat/completions", json={
        "model": "smollm2", "messages": QUESTION, "max_tokens": 4, "stream": True}, stream=True, timeout=60)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = [line for line in response.iter_lines(decode_unicode=True) if line]
    assert all(line.startswith("data: ") for line in events) and events[-1] == "data: [DONE]"


def test_unknown_model_and_bad_field_are_openai_errors(client, serve_app):
    import openai

    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="no-such-llm", messages=QUESTION)
    assert "no-such-llm" in err.value.message and "served: smollm2; flows:" in err.value.message  # each name once
    body = err.value.body
    assert body["param"] == "model" and body["code"] == "model_not_found"
    # an embedding model is not a language model either
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="minilm", messages=QUESTION)
    bad = requests.post(f"{serve_app}/v1/chat/completions", json={
        "model": "smollm2", "messages": QUESTION, "temperature": 7}, timeout=30)
    assert bad.status_code == 422 and bad.json()["error"]["param"] == "temperature"
    empty = requests.post(f"{serve_app}/v1/chat/completions", json={"model": "smollm2", "messages": []}, timeout=30)
    assert empty.status_code == 422 and empty.json()["error"]["param"] == "messages"
    # asking for a tool call or JSON is refused, not answered in text as if it had not been asked
    tool = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}
    with pytest.raises(openai.UnprocessableEntityError) as err:
        client.chat.completions.create(model="smollm2", messages=QUESTION, tools=[tool])
    assert err.value.body["param"] == "tools" and "not supported" in err.value.message
    with pytest.raises(openai.UnprocessableEntityError) as err:
        client.chat.completions.create(model="rag", messages=QUESTION, response_format={"type": "json_object"})
    assert err.value.body["param"] == "response_format"


def test_null_n_and_stream_from_the_openai_client_are_answered(client):
    """``n=None`` and ``stream=None`` reach the service as null, which OpenAI's API reads as 1 and false: a 422."""
    done = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=2, n=None, stream=None)
    assert len(done.choices) == 1 and done.choices[0].message.content and done.object == "chat.completion"


def test_a_conversation_longer_than_the_context_is_a_400_that_says_what_to_do(client):
    import openai

    too_long = [{"role": "user", "content": "bee " * 5000}]  # 5,031 tokens; SmolLM2 is loaded with 4,096
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="smollm2", messages=too_long, max_tokens=4)
    assert err.value.body["code"] == "context_length_exceeded" and err.value.body["param"] == "messages"
    assert "5,031 tokens" in err.value.message and "start a new conversation" in err.value.message
    with pytest.raises(openai.BadRequestError) as err:  # streamed too: refused before the stream's headers
        client.chat.completions.create(model="smollm2", messages=too_long, max_tokens=4, stream=True)
    assert "4,096" in err.value.message and err.value.body["code"] == "context_length_exceeded"
    answer = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=4)  # the replica is fine
    assert answer.choices[0].message.content


def test_models_lists_the_language_model(client):
    cards = {m.id: m for m in client.models.list().data}
    llm = cards["smollm2"]
    assert llm.type == "chat" and llm.engine == "llama_cpp" and llm.status == "ready" and llm.aliases == ["local"]
    assert client.models.retrieve("local").id == "smollm2"


def test_tessera_gateway_reaches_the_deployment(serve_app, tmp_path, monkeypatch):
    """An alias whose api_base is the Serve URL: the same greedy answer as the embedded model in-process."""
    from operators.llm import complete

    (tmp_path / "models.yaml").write_text(
        f"served:\n  model: openai/smollm2\n  api_base: {serve_app}/v1\n  api_key_env: SERVED_KEY\n")
    monkeypatch.setenv("TESSERA_MODELS", str(tmp_path / "models.yaml"))
    monkeypatch.setenv("SERVED_KEY", "unused")
    served = complete(QUESTION[0]["content"], model="served", max_tokens=16)
    local = complete(QUESTION[0]["content"], model="local", max_tokens=16)
    assert served.text == local.text and served.completion_tokens == local.completion_tokens
