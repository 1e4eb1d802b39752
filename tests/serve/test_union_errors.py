"""A value none of a field's kinds takes is one problem in the client's terms, named by the value's own path: a chat
message's ``content`` of 5 was ``messages.0.content.str: Input should be a valid string;
messages.0.content.list[dict[str,any]]: ...`` with ``param`` ``messages``, an embedding ``input`` of 5
``input.str: ...; input.list[str]: ...``, a rerank document of 1 ``documents.0.RerankDocument: ...``. And
``queries: []`` on a search named ``query``, which the client did not send. The service's bodies and error handlers
under uvicorn on 127.0.0.1; the routes stand in for the Serve ingress's (which needs a replica): every body here is
refused before one is reached."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from fastapi import FastAPI

from serve.chat import chat
from serve import schemas
from serve.http import error_handlers
from tests.serve.conftest import api_on_localhost


@pytest.fixture(scope="module")
def models_api():
    app = FastAPI()
    error_handlers.install(app)

    @app.post("/v1/chat/completions")
    async def chat_completions(body: chat.ChatRequest) -> Any:
        return {}

    @app.post("/v1/embeddings")
    async def embeddings(body: schemas.EmbeddingsRequest) -> Any:
        return {}

    @app.post("/v1/rerank")
    async def rerank(body: schemas.RerankRequest) -> Any:
        return {}

    with api_on_localhost(app=app) as url:
        yield url


@pytest.mark.parametrize("path, body, param, message", [
    ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages.0.content",
     "messages.0.content: must be a string or an array of objects, not a number"),
    ("/v1/embeddings", {"model": "m", "input": 5}, "input", "input: must be a string or an array of strings, not a "
     "number"),
    ("/v1/rerank", {"model": "m", "query": "q", "documents": [1, "b"]}, "documents.0",
     "documents.0: must be a string or an object, not a number"),
])
def test_a_value_no_kind_of_its_field_takes_is_one_problem_naming_it(models_api, path, body, param, message):
    answer = requests.post(models_api + path, json=body, timeout=30)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["message"]) == (param, message), error


def test_an_empty_queries_is_refused_naming_queries(notes_api):
    answer = requests.post(notes_api + "/v1/search", json={"queries": [], "index": "notes"}, timeout=60)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == ("queries", "no_query") and "queries is empty" in error["message"]
