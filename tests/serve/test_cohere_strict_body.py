"""``POST /v2/chat``'s body is as strict as Cohere's API (and as ``/v1/chat/completions``'): a number or boolean of
another JSON type (``max_tokens: "3"``, ``3.0``, ``true``; ``temperature: "0.5"``; ``stream: "true"``) and a field
Cohere does not have (``max_token``) are each a 422 naming the field; before, pydantic's lax mode read the first and
the second was ignored. Every field of the installed ``cohere`` client's ``chat`` is still taken. The service's body
and error handlers under uvicorn on 127.0.0.1; the route stands in for the Serve ingress's (which needs a replica)
and answers what a served model's engine would get, so nothing runs a model."""

from __future__ import annotations

import inspect
from typing import Any

import pytest
import requests
from fastapi import FastAPI

from serve.chat import cohere_chat
from serve.http import error_handlers
from tests.serve.conftest import api_on_localhost

QUESTION = [{"role": "user", "content": "Which insects make honey?"}]


@pytest.fixture(scope="module")
def base():
    app = FastAPI()
    error_handlers.install(app)

    @app.post("/v2/chat")
    async def chat_v2(body: cohere_chat.CohereChatRequest) -> Any:
        return body.openai().engine_body()

    with api_on_localhost(app=app) as url:
        yield url


def post(base: str, **fields: Any) -> requests.Response:
    return requests.post(base + "/v2/chat", json={"model": "smollm2", "messages": QUESTION, **fields}, timeout=30)


#: Fields of another JSON type than Cohere's, each with what the 422 says.
WRONG_TYPES = [("max_tokens", "3", "valid integer"), ("max_tokens", 3.0, "valid integer"),
               ("max_tokens", True, "valid integer"), ("temperature", "0.5", "valid number"),
               ("p", "0.9", "valid number"), ("k", "5", "valid integer"), ("seed", "7", "valid integer"),
               ("seed", 10**23, "less than or equal to"),
               ("frequency_penalty", "0.1", "valid number"), ("presence_penalty", "0.1", "valid number"),
               ("stream", "true", "valid boolean"), ("logprobs", "false", "valid boolean"),
               ("max_token", 5, "Extra inputs are not permitted"),
               ("citation_options", {"mode": "OFF", "quality": "high"}, "Extra inputs are not permitted"),
               ("tool_choice", "REQUIRED", "tool_choice is not supported"),
               ("stop_sequences", [".", ""], "stop sequence 1 is empty"),
               ("stop_sequences", ["\ud83d"], "lone surrogate"),
               ("response_format", {"type": "json_object"}, "only {'type': 'text'}"),
               ("logprobs", True, "no log probabilities"),
               ("k", 1, "top-k sampling (k: 1) is not supported")]  # was dropped: sampled from every token


def test_a_field_cohere_refuses_is_a_422_naming_it(base):
    for field, value, said in WRONG_TYPES:
        answer = post(base, **{field: value})
        assert answer.status_code == 422, (field, value, answer.text)
        error = answer.json()["error"]
        exact = "citation_options.quality" if field == "citation_options" else field  # the field inside it
        assert error["param"] == exact and said in error["message"], (field, value, error)


def test_cohere_s_fields_of_the_right_types_are_taken(base):
    answer = post(base, max_tokens=3, temperature=1, p=0.5, k=0, seed=7, stream=False, safety_mode="CONTEXTUAL",
                  thinking={"type": "disabled"}, logprobs=False, strict_tools=False, priority=0,
                  response_format={"type": "text"}, citation_options={"mode": "OFF"})
    assert answer.status_code == 200, answer.text
    assert {key: answer.json()[key] for key in ("max_tokens", "temperature", "top_p", "seed")} == {
        "max_tokens": 3, "temperature": 1.0, "top_p": 0.5, "seed": 7}


def test_every_field_of_the_cohere_client_s_chat_is_a_field_of_the_body():
    """The client sends only the fields its caller set, so the body forbids others without refusing a client's."""
    import cohere

    for method in (cohere.ClientV2.chat, cohere.ClientV2.chat_stream):
        sent = set(inspect.signature(method).parameters) - {"self", "request_options"}
        assert sent <= set(cohere_chat.CohereChatRequest.model_fields), sent - set(
            cohere_chat.CohereChatRequest.model_fields)
