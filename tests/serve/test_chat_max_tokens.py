"""A chat with a llama.cpp model that asks for more tokens than its context window holds (4,096: every model the
llama_cpp engine loads) is a 422 naming ``max_tokens`` (or ``max_completion_tokens``), on OpenAI's and Cohere's
routes, before the model is called; before, ``max_tokens: 10**9`` was a 200, the reply bounded by the window without
a word. So is one with a vLLM model above its config's ``engine_kwargs.max_model_len`` (vLLM is not installed here:
the check up to the engine). The quick tests: the service's bodies and error handlers under uvicorn on 127.0.0.1, the
routes standing in for the Serve ingress's with the card the app builds from a model's config and no deployment (the
refusal comes first). The Ray test: the shared app's llama.cpp deployment, where the window's own size still answers."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from fastapi import FastAPI

from operators.llm.embedded_model import CONTEXT_TOKENS
from serve.chat import chat, cohere_chat
from serve.http import error_handlers
from serve.app import ServeConfigError, llm_card, parse_args
from serve.schemas import ModelCard
from tests.serve.conftest import api_on_localhost

QUESTION = [{"role": "user", "content": "Name one insect that makes honey."}]
#: A vLLM model as serve/config.yaml's example configures one.
QWEN = {"name": "qwen2.5-7b", "engine": "vllm", "model": "Qwen/Qwen2.5-7B-Instruct",
        "engine_kwargs": {"max_model_len": 8192}}


def served_card(llm: dict[str, Any]) -> ModelCard:
    """The card the app builds for a language model of ``args.llms`` that is deployed."""
    return ModelCard.model_validate(llm_card(parse_args({"llms": [llm]}).llms[0], None))


def chat_routes(card: ModelCard) -> FastAPI:
    """OpenAI's and Cohere's chat routes answering for ``card``'s model, with no deployment behind it."""
    app = FastAPI()
    error_handlers.install(app)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: chat.ChatRequest) -> Any:
        return await chat.chat_response(None, card, body)

    @app.post("/v2/chat")
    async def chat_v2(body: cohere_chat.CohereChatRequest) -> Any:
        return await cohere_chat.respond(body, card, None, "local")

    return app


@pytest.mark.parametrize("llm, window", [({"name": "smollm2"}, CONTEXT_TOKENS), (QWEN, 8192)])
def test_more_tokens_than_the_context_window_is_a_422_naming_the_field(llm, window):
    card = served_card(llm)
    with api_on_localhost(app=chat_routes(card)) as base:
        for path, field, asked in [("/v1/chat/completions", "max_tokens", 10**9),
                                   ("/v1/chat/completions", "max_completion_tokens", window + 1),
                                   ("/v2/chat", "max_tokens", window + 1)]:
            answer = requests.post(base + path, json={"model": card.id, "messages": QUESTION, field: asked},
                                   timeout=30)
            assert answer.status_code == 422, (path, field, answer.text)
            error = answer.json()["error"]
            assert error["param"] == field and f"holds {window} tokens" in error["message"], error
    chat.check_max_tokens(card, chat.ChatRequest(model=card.id, messages=QUESTION, max_tokens=window))  # passes


def test_a_vllm_model_without_max_model_len_is_bounded_by_its_engine_alone():
    """Without ``max_model_len`` vLLM takes the model's own length, read from the model by the engine."""
    card = served_card({**QWEN, "engine_kwargs": {}})
    assert card.context_window is None
    chat.check_max_tokens(card, chat.ChatRequest(model=card.id, messages=QUESTION, max_tokens=100_000))


@pytest.mark.parametrize("length", ["8k", 0, 8192.0, True])
def test_a_max_model_len_that_is_no_number_of_tokens_is_refused_naming_it(length):
    with pytest.raises(ServeConfigError, match="max_model_len must be a whole number of tokens") as err:
        parse_args({"llms": [{**QWEN, "engine_kwargs": {"max_model_len": length}}]})
    assert "engine_kwargs" in err.value.field, err.value.field


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


def test_an_index_with_a_served_model_is_a_422_naming_it():
    """``index`` is for flows: with a language model alone it was dropped without a word (an index that does not
    exist too), and a client that meant a grounded answer got one from the bare model."""
    card = served_card({"name": "smollm2"})
    with api_on_localhost(app=chat_routes(card)) as base:
        for path in ("/v1/chat/completions", "/v2/chat"):
            answer = requests.post(base + path, json={"model": card.id, "messages": QUESTION, "max_tokens": 4,
                                                      "index": "nope"}, timeout=30)
            assert answer.status_code == 422, (path, answer.text)
            error = answer.json()["error"]
            assert error["param"] == "index" and "is a language model, which reads no index" in error["message"]


def test_params_with_a_served_model_is_a_422_naming_it():
    """``params`` set a flow's step params (``extra_body={"params": ...}``): with a language model alone they were
    dropped without a word (a 200), as ``index`` was. None, or an empty object, asks for nothing and is taken."""
    card = served_card({"name": "smollm2"})
    with api_on_localhost(app=chat_routes(card)) as base:
        answer = requests.post(f"{base}/v1/chat/completions", json={
            "model": card.id, "messages": QUESTION, "max_tokens": 4, "params": {"top.k": 3}}, timeout=30)
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error["param"] == "params" and "is a language model, which runs no flow's steps" in error["message"]
    for params in (None, {}):
        chat.check_no_flow_fields(card, chat.ChatRequest(model=card.id, messages=QUESTION, params=params))
