"""Cohere's ``/v2/chat``: a flow's reply that is no answer ("No answer could be written (...)") ends ``ERROR``, not
``COMPLETE``, streamed or not, so a Cohere client can leave it out of the messages it sends next (the OpenAI route
marks it ``answered: false``); sent back all the same, ``query.contextualize`` leaves it out. The route's own
function under uvicorn on 127.0.0.1 beside a real ``Service``; the model the fault server's failing one."""

from __future__ import annotations

import json
from typing import Any

import requests
from fastapi import FastAPI

from flows.spec import FlowSpec
from serve.chat import cohere_chat
from serve.http import error_handlers
from tests.serve.conftest import api_on_localhost

DOCUMENTS = [{"id": "fruit", "data": {"title": "Zorblat", "text": "The zorblat fruit is purple and grows on Mars."}}]


def answering_with(model: str) -> FastAPI:
    spec = FlowSpec.parse({"name": "answers", "steps": {
        "context": {"op": "generate.context"},
        "answer": {"op": "generate.answer", "params": {"model": model, "num_retries": 0}}}})
    app = FastAPI()
    error_handlers.install(app)

    @app.post("/v2/chat")
    async def chat_v2(body: cohere_chat.CohereChatRequest) -> Any:
        return await cohere_chat.respond(body, spec, None, "local")

    return app


def ask(base: str, stream: bool) -> tuple[str, str]:
    """The reply's text and finish reason."""
    body = {"model": "answers", "stream": stream, "documents": DOCUMENTS,
            "messages": [{"role": "user", "content": "What colour is the zorblat fruit?"}]}
    answer = requests.post(f"{base}/v2/chat", json=body, timeout=120)
    assert answer.status_code == 200, answer.text
    if not stream:
        done = answer.json()
        return done["message"]["content"][0]["text"], done["finish_reason"]
    events = [json.loads(line[len("data: "):]) for line in answer.text.splitlines() if line.startswith("data: ")]
    text = "".join(e["delta"]["message"]["content"]["text"] for e in events if e["type"] == "content-delta")
    return text, next(e["delta"]["finish_reason"] for e in events if e["type"] == "message-end")


def test_a_reply_that_is_no_answer_ends_error_and_an_answer_complete(fault_models, make_service):
    make_service()
    with api_on_localhost(app=answering_with("fault-error")) as base:
        for stream in (False, True):
            text, finish = ask(base, stream)
            assert text.startswith("No answer could be written (") and finish == "ERROR", (stream, text, finish)
    fault_models.reply = "It is purple [1]."
    with api_on_localhost(app=answering_with("fault-ok")) as base:
        for stream in (False, True):
            assert ask(base, stream) == ("It is purple [1].", "COMPLETE"), stream
