"""The service behind nginx, as most operators deploy it (docs/serving.md, "Behind a reverse proxy").

nginx buffers a proxied response (in its gzip too, where an operator compresses every type), so a streamed answer
(server-sent events) reached the client all at once at its end, however long the model took; the service now says
``X-Accel-Buffering: no`` (and ``Cache-Control: no-cache``, for any cache between) on every stream.
The chat of a finished task (``GET /task/chat/{id}?stream=true``) over real HTTP on 127.0.0.1 (the service's
FastAPI app under uvicorn; no Ray), the model the local fault server's ``paced`` scenario (a word every 50 ms);
the nginx test runs a real nginx (skipped where it is not installed)."""

from __future__ import annotations

import json

import httpx
import pytest

from tests.serve.conftest import api_on_localhost, finished_search, paced_model
from tests.serve.nginx_proxy import nginx_in_front

pytestmark = pytest.mark.slow  # litellm's import

QUESTION = {"message": "Which insects make honey?", "stream": True}


@pytest.fixture
def paced(tmp_path, monkeypatch):
    with paced_model(tmp_path, monkeypatch, 60) as server:
        yield server


@pytest.fixture
def chat(make_service, paced):
    """The base URL of the service and a chat about one finished task, with the paced model."""
    task_id = finished_search(make_service())
    with api_on_localhost() as base:
        made = httpx.get(f"{base}/task/chat/new", params={"task_id": task_id, "model": "fault-paced"}, timeout=60)
        assert made.status_code == 200, made.text
        yield base, made.text


def test_a_streamed_answer_tells_proxies_not_to_buffer_or_cache_it(chat):
    base, chat_id = chat
    with httpx.stream("GET", f"{base}/task/chat/{chat_id}", params=QUESTION, timeout=60) as got:
        assert got.status_code == 200
        assert got.headers["content-type"].startswith("text/event-stream")
        assert got.headers.get("x-accel-buffering") == "no", dict(got.headers)
        assert got.headers.get("cache-control") == "no-cache", dict(got.headers)
        got.read()


@pytest.mark.process  # nginx
def test_through_nginx_the_first_piece_comes_while_the_model_still_writes(chat, paced, tmp_path):
    base, chat_id = chat
    with nginx_in_front(base, tmp_path) as proxied, httpx.stream(
            "GET", f"{proxied}/task/chat/{chat_id}", params=QUESTION, timeout=60) as got:
        assert got.status_code == 200, got.read()
        events = (line.removeprefix("data: ") for line in got.iter_lines() if line.startswith("data: "))
        first = next(event for event in events if "text" in json.loads(event))
        writing = sum(paced.in_flight.values())  # the model's answer, still being written when its first word came
        rest = list(events)
    assert writing == 1, f"the first piece ({first}) came through nginx only after the model's whole answer"
    assert rest[-1] == "[DONE]", rest[-3:]
