"""A chat with a llama.cpp model that asks for more tokens than its context window holds (4,096: every model the
llama_cpp engine loads) is a 422 naming ``max_tokens`` (or ``max_completion_tokens``), on OpenAI's and Cohere's
routes, before the model is called; before, ``max_tokens: 10**9`` was a 200, the reply bounded by the window without
a word. The quick test: the service's bodies and error handlers under uvicorn on 127.0.0.1, the routes standing in for
the Serve ingress's with the card of a llama.cpp model and no deployment (the refusal comes first). The Ray test: the
shared app's llama.cpp deployment, where the window's own size still answers."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from fastapi import FastAPI

from operators.llm.embedded import CONTEXT_TOKENS
from serve import chat, cohere_chat, errors
from serve.schemas import ModelCard
from tests.serve.conftest import api_on_localhost

QUESTION = [{"role": "user", "content": "Name one insect that makes honey."}]
LLAMA = ModelCard(id="smollm2", type="chat", operator="llm.llama_cpp", engine="llama_cpp", deployment="smollm2",
                  status="ready")


def test_more_tokens_than_the_context_window_is_a_422_naming_the_field():
    app = FastAPI()
    errors.install(app)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: chat.ChatRequest) -> Any:
        return await chat.chat_response(None, LLAMA, body)

    @app.post("/v2/chat")
    async def chat_v2(body: cohere_chat.CohereChatRequest) -> Any:
        return await cohere_chat.respond(body, LLAMA, None, "local")

    with api_on_localhost(app=app) as base:
        for path, field, asked in [("/v1/chat/completions", "max_tokens", 10**9),
                                   ("/v1/chat/completions", "max_completion_tokens", CONTEXT_TOKENS + 1),
                                   ("/v2/chat", "max_tokens", 10**9)]:
            answer = requests.post(base + path, json={"model": "smollm2", "messages": QUESTION, field: asked},
                                   timeout=30)
            assert answer.status_code == 422, (path, field, answer.text)
            error = answer.json()["error"]
            assert error["param"] == field and f"holds {CONTEXT_TOKENS} tokens" in error["message"], error


@pytest.mark.ray
@pytest.mark.slow  # the shared app's start, and an answer of the embedded model
def test_the_window_s_own_size_still_answers_on_a_deployment(serve_app):
    ask = {"model": "smollm2", "messages": QUESTION, "temperature": 0}
    answer = requests.post(f"{serve_app}/v1/chat/completions", json={**ask, "max_tokens": 10**9}, timeout=120)
    assert answer.status_code == 422 and answer.json()["error"]["param"] == "max_tokens", answer.text
    answer = requests.post(f"{serve_app}/v1/chat/completions", json={**ask, "max_tokens": CONTEXT_TOKENS},
                           timeout=300)
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"].strip()
