"""A task chat names its language model by alias: a name that is none (the served model's id, ``smollm2``) is refused
in the service's terms, with its aliases and the close one, where the gateway's message offered litellm model strings
that the service then refused as ``model_not_allowed``. The service's FastAPI app under uvicorn on 127.0.0.1 with a
real SQLite task store."""

from __future__ import annotations

import httpx

from tests.serve.conftest import api_on_localhost, finished_search


def test_a_task_chats_model_that_is_no_alias_is_refused_with_the_aliases(make_service):
    task = finished_search(make_service())
    with api_on_localhost() as base:
        def made(model: str) -> httpx.Response:
            return httpx.get(f"{base}/task/chat/new", params={"task_id": task, "model": model}, timeout=30)

        served_id, misspelt, litellm_string, alias = made("smollm2"), made("locl"), made("ollama_chat/gemma2"), \
            made("local")
    error = served_id.json()["error"]
    assert (served_id.status_code, error["param"], error["code"]) == (422, "model", "model_not_found"), error
    assert "by its alias (" in error["message"] and "local" in error["message"], error
    assert "litellm" not in error["message"] and "provider/name" not in error["message"], error
    assert "did you mean 'local'?" in misspelt.json()["error"]["message"]
    assert (litellm_string.status_code, litellm_string.json()["error"]["code"]) == (422, "model_not_allowed")
    assert alias.status_code == 200 and len(alias.text) == 32
