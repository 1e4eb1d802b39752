"""``POST /v1/chat/completions`` refuses what OpenAI's API refuses instead of reading it leniently: ``max_tokens: "3"``
(a string read as 3), a ``stop`` list over 4 (ten were taken), a content part without its ``type`` (read as text), a
text part whose text is not a string (read as "" or "5"), an empty stop sequence (the answer ended before its first
word) or one that is no text (a 500), ``logprobs`` (answered as null), each a 422 naming the field; and ``stop`` on a
flow, whose answer takes none (it was dropped without a word), on OpenAI's and Cohere's bodies (``stop_sequences``).
The bodies and error handlers are the service's; the routes stand in for the Serve ingress's (which needs a replica)
and call what its flow branch calls, over a real ``Service`` (no Ray: everything here is refused before a model or a
flow runs)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from serve.chat import chat, cohere_chat
from tests.serve.conftest import chat_app

QUESTION = [{"role": "user", "content": "Which insects make honey?"}]


@pytest.fixture
def client(make_service):
    make_service()
    return TestClient(chat_app())


def refused(client: TestClient, path: str, body: dict) -> dict:
    answer = client.post(path, json=body)
    assert answer.status_code == 422, answer.text
    return answer.json()["error"]


@pytest.mark.parametrize("field, value, said", [
    ("max_tokens", "3", "valid integer"), ("max_completion_tokens", 3.0, "valid integer"),
    ("temperature", "0.5", "valid number"), ("stream", "true", "valid boolean"),
    ("stop", [f"s{i}" for i in range(10)], "at most 4 stop sequences"),
    ("stop", "", "stop sequence 0 is empty"), ("stop", ["\n", ""], "stop sequence 1 is empty"),
    ("logprobs", True, "no log probabilities"), ("top_logprobs", 2, "no log probabilities"),
    ("n", 9, "less than or equal to 8"), ("n", 2.0, "valid integer"), ("seed", 10**23, "less than or equal to"),
    ("seed", -2**63 - 1, "greater than or equal to"),
    # each was dropped without a word: a token banned by -100 could still be written, audio asked for never came
    ("logit_bias", {"50256": -100}, "logit_bias is not supported"),
    ("modalities", ["text", "audio"], "only [\"text\"]"),
    ("audio", {"voice": "alloy", "format": "wav"}, "audio output is not supported"),
    ("user", 5, "valid string"), ("user", ["alice"], "valid string"),  # OpenAI's end-user id: was ignored
])
def test_a_field_openai_refuses_is_a_422_naming_it(client, field, value, said):
    error = refused(client, "/v1/chat/completions", {"model": "rag", "messages": QUESTION, field: value})
    assert error["param"] == field and said in error["message"], error
    assert "Value error" not in error["message"]  # pydantic's prefix of a validator's own words (the SDKs show it)


@pytest.mark.parametrize("path, field, value", [
    ("/v1/chat/completions", "temperature", "NaN"), ("/v1/chat/completions", "top_p", "NaN"),
    ("/v1/chat/completions", "frequency_penalty", "-Infinity"), ("/v2/chat", "temperature", "NaN"),
    ("/v2/chat", "p", "Infinity"),
])
def test_nan_or_an_infinity_is_a_422_saying_a_number_is_finite(client, path, field, value):
    """Python's JSON reads them; the 422 said NaN "should be less than or equal to 2", its bound's check."""
    body = json.dumps({"model": "rag", "messages": QUESTION})[:-1] + f', "{field}": {value}}}'
    answer = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["param"] == field and error["message"] == f"{field}: Input should be a finite number", error


def test_a_content_part_without_its_type_is_a_422_naming_it(client):
    messages = [{"role": "user", "content": [{"type": "text", "text": "Which insects"}, {"text": "make honey?"}]}]
    error = refused(client, "/v1/chat/completions", {"model": "rag", "messages": messages})
    assert error["param"] == "messages[0].content[1].type" and "names its type" in error["message"], error


@pytest.mark.parametrize("part, said", [({"type": "text"}, "is missing"),
                                        ({"type": "text", "text": 5}, "is a number, not a string"),
                                        ({"type": "text", "text": None}, "is null, not a string")])
def test_a_text_part_without_a_string_is_a_422_naming_it(client, part, said):
    """Read as "" or as "5" before: the model answered a message the caller did not send. Said in JSON's words (it
    said "is NoneType", "is int")."""
    messages = [{"role": "user", "content": [{"type": "text", "text": "Which insects"}, part]}]
    error = refused(client, "/v1/chat/completions", {"model": "rag", "messages": messages})
    assert error["param"] == "messages[0].content[1].text" and said in error["message"], error


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v2/chat"])
@pytest.mark.parametrize("kind, said", [(None, "null"), (5, "a number"), (["text"], "an array")])
def test_a_content_part_whose_type_is_no_string_is_a_422_naming_it(client, path, kind, said):
    """As a part without its type: it was a 400 "'None' content is not supported", in Python's words."""
    messages = [{"role": "user", "content": [{"type": kind, "text": "Which insects make honey?"}]}]
    error = refused(client, path, {"model": "rag", "messages": messages})
    assert error["param"] == "messages[0].content[0].type", error
    assert f"a content part's type is a string, not {said}" in error["message"], error


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v2/chat"])
@pytest.mark.parametrize("message, said", [
    ({"role": "user"}, "got none"), ({"role": "user", "content": None}, "got none"),
    ({"role": "system", "content": []}, "got an empty list"),
])
def test_a_message_without_content_is_a_422_naming_it(client, path, message, said):
    """OpenAI and Cohere refuse it; the model was asked an empty message (an assistant's may be empty: tool calls)."""
    error = refused(client, path, {"model": "rag", "messages": [message, *QUESTION]})
    assert error["param"] == "messages[0].content" and said in error["message"], error
    answer = client.post(path, json={"model": "nope", "messages": [{"role": "assistant", "content": None}, *QUESTION]})
    assert answer.status_code == 404, answer.text  # past the body's checks


def test_a_stop_sequence_that_is_no_text_is_a_422_naming_it(client):
    """A lone surrogate reached llama.cpp, whose call failed: a 500. JSON carries it escaped."""
    body = json.dumps({"model": "smollm2", "messages": QUESTION, "stop": ["\ud83d"]})
    answer = client.post("/v1/chat/completions", content=body, headers={"Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["param"] == "stop" and "lone surrogate" in answer.json()["error"]["message"]


def test_stop_on_a_flow_is_refused_naming_the_field_sent(client):
    error = refused(client, "/v1/chat/completions", {"model": "rag", "messages": QUESTION, "stop": ["\n"]})
    assert (error["param"], error["code"]) == ("stop", "unsupported_parameter"), error
    error = refused(client, "/v2/chat", {"model": "rag", "messages": QUESTION, "stop_sequences": ["\n"] * 5})
    assert (error["param"], error["code"]) == ("stop_sequences", "unsupported_parameter"), error


@pytest.mark.parametrize("path, field, value", [
    ("/v1/chat/completions", "top_p", 0.5), ("/v1/chat/completions", "presence_penalty", 1.5),
    ("/v1/chat/completions", "frequency_penalty", -1.0), ("/v2/chat", "p", 0.5), ("/v2/chat", "presence_penalty", 0.5),
    ("/v2/chat", "frequency_penalty", 0.5),
])
def test_a_sampling_option_a_flow_takes_none_of_is_refused_naming_the_field_sent(client, path, field, value):
    """A flow's steps take temperature, seed and max_tokens only: top_p (Cohere's p) and the penalties were dropped
    without a word, the answer sampled as if they were not sent."""
    error = refused(client, path, {"model": "rag", "messages": QUESTION, field: value})
    assert (error["param"], error["code"]) == (field, "unsupported_parameter"), error
    assert "only temperature, seed and max_tokens" in error["message"], error


def test_the_neutral_sampling_options_and_empty_logit_bias_pass_a_flow_s_checks(client):
    """What chat clients send by default (top_p 1, no penalty, {} or text only) asks for nothing: not refused."""
    body = {"model": "rag", "messages": [{"role": "system", "content": "Be brief."}], "top_p": 1, "logit_bias": {},
            "presence_penalty": 0, "frequency_penalty": 0, "modalities": ["text"]}
    error = refused(client, "/v1/chat/completions", body)  # past every option's check, to the question's
    assert error["param"] == "messages" and "no user message" in error["message"], error


def test_null_stream_and_n_are_their_defaults(client):
    """OpenAI's spec types them "boolean or null" and "integer or null", and the openai client sends ``n=None`` as
    null: each was a 422 ("stream: Input should be a valid boolean")."""
    body = {"model": "rag", "messages": [{"role": "system", "content": "Be brief."}], "stream": None, "n": None}
    error = refused(client, "/v1/chat/completions", body)  # past every option's check, to the question's
    assert error["param"] == "messages" and "no user message" in error["message"], error


def test_cohere_s_five_stop_sequences_reach_a_served_model():
    request = cohere_chat.CohereChatRequest(model="smollm2", messages=QUESTION, stop_sequences=["a"] * 5).openai()
    assert request.engine_body()["stop"] == ["a"] * 5  # OpenAI's bound of 4 is for OpenAI's body


def test_an_assistant_s_refusal_is_its_turn_and_another_role_s_is_refused_naming_it(client):
    """OpenAI's API takes an assistant message's ``{"type": "refusal", "refusal": ...}`` parts (and a replayed answer's
    ``refusal`` beside null content); a conversation holding one was a 400 ("'refusal' content is not supported")."""
    said = "I can't help with that."
    for assistant in ({"role": "assistant", "content": [{"type": "refusal", "refusal": said}]},
                      {"role": "assistant", "content": None, "refusal": said}):
        body = {"model": "smollm2", "messages": [*QUESTION, assistant, {"role": "user", "content": "Why not?"}]}
        turns = chat.ChatRequest.model_validate(body).engine_body()["messages"]
        assert turns[1] == {"role": "assistant", "content": said}, turns  # what a served model reads
        answer = client.post("/v1/chat/completions", json={**body, "model": "nope"})
        assert answer.status_code == 404 and answer.json()["error"]["param"] == "model", answer.text  # past the body
    refusal = {"type": "refusal", "refusal": said}
    answer = client.post("/v1/chat/completions", json={"model": "rag", "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Which insects make honey?"}, refusal]}]})
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == "messages[0].content[1].type" and "an assistant message's only" in error["message"]
    error = refused(client, "/v1/chat/completions", {"model": "rag", "messages": [
        *QUESTION, {"role": "assistant", "content": [{"type": "refusal", "refusal": 5}]}, *QUESTION]})
    assert error["param"] == "messages[1].content[0].refusal" and "is a number, not a string" in error["message"], error


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v2/chat"])
def test_a_user_that_is_no_string_is_a_422_naming_it(client, path):
    """OpenAI's API refuses ``user: 5``; it was ignored here. Cohere's v2 body has no ``user``: a field it lacks."""
    error = refused(client, path, {"model": "rag", "messages": QUESTION, "user": 5})
    assert error["param"] == "user", error
    said = "valid string" if path.startswith("/v1") else "Extra inputs are not permitted"
    assert said in error["message"], error


def test_a_user_string_is_taken_and_not_passed_to_the_engine():
    request = chat.ChatRequest.model_validate({"model": "smollm2", "messages": QUESTION, "user": "alice"})
    assert request.user == "alice" and "user" not in request.engine_body()
