"""A chat with a served language model over ``max_chat_chars`` is refused before the model sees it (llama.cpp
tokenised a 600 KB message before saying that it did not fit): a 400 naming ``messages``, on OpenAI's and Cohere's
chat bodies: in this process (no deployment is reached: its handle is never used), and over real HTTP on the shared
app's llama.cpp deployment, streamed and not, whose replica answers the next request."""

from __future__ import annotations

import pytest
import requests

from serve.chat import chat, cohere_chat
from serve.http.errors import ApiError
from serve.schemas import ModelCard
from serve.service_settings import Limits

CARD = ModelCard(id="smollm2", type="chat", operator="llm", engine="llama_cpp", deployment="smollm2", status="ready")


def test_a_conversation_over_max_chat_chars_is_a_400_naming_messages_on_both_apis():
    limit = Limits().max_chat_chars
    half = "bees " * (limit // 10 + 1)  # two messages, each under the limit, over it together
    messages = [{"role": "user", "content": half}, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": [{"type": "text", "text": half}]}]
    openai = chat.ChatRequest(model="smollm2", messages=messages)
    cohere = cohere_chat.CohereChatRequest(model="smollm2", messages=messages).openai()
    for request in (openai, cohere):
        with pytest.raises(ApiError) as err:
            chat.engine_events(None, CARD, request)
        assert (err.value.status, err.value.param, err.value.code) == (400, "messages", "max_chat_chars")
        assert f"max_chat_chars={limit}" in err.value.message



@pytest.mark.ray
def test_over_http_both_chat_apis_refuse_it_before_the_model_and_the_model_answers_on(serve_app, limits):
    limit = limits["max_chat_chars"]
    long = [{"role": "user", "content": "b" * (limit + 1)}]  # within max_body_bytes
    for path in ("/v1/chat/completions", "/v2/chat"):
        for stream in (False, True):
            answer = requests.post(serve_app + path, json={"model": "smollm2", "messages": long, "stream": stream,
                                                           "max_tokens": 4}, timeout=60)
            assert answer.status_code == 400, (path, stream, answer.text)
            error = answer.json()["error"]
            assert (error["param"], error["code"]) == ("messages", "max_chat_chars"), error
            assert f"{limit + 1} characters" in error["message"] and f"max_chat_chars={limit}" in error["message"]
    short = [{"role": "user", "content": "Name one insect that makes honey."}]
    answer = requests.post(serve_app + "/v1/chat/completions", json={"model": "smollm2", "messages": short,
                                                                     "max_tokens": 4}, timeout=120)
    assert answer.status_code == 200 and answer.json()["choices"][0]["message"]["content"], answer.text
