"""The ingress's drain middleware (``serve/http/draining.py``) on a small app under uvicorn on localhost, without Ray: a
request in flight is counted until its response has ended (a streamed one until its last chunk) and finishes once
draining began, while a new one, ``/healthz`` too, is a 503 ``shutting_down`` in the API's error shape with
``Retry-After``. The end-to-end drain of ``tessera serve`` is tests/serve/test_drain_on_sigterm.py."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests
from starlette.applications import Starlette
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from serve.http import draining
from tests.serve.conftest import api_on_localhost

RELEASE = threading.Event()


async def slow(request):
    await asyncio.to_thread(RELEASE.wait, 30)
    return JSONResponse({"done": True})


async def stream(request):
    async def chunks():
        yield b"first\n"
        await asyncio.to_thread(RELEASE.wait, 30)
        yield b"last\n"

    return StreamingResponse(chunks(), media_type="text/plain")


async def healthz(request):
    return JSONResponse({"status": "ok"})


@pytest.fixture
def base():
    """The app, with ``DrainGuard`` outermost, on a free port of 127.0.0.1; not draining before or after."""
    app = Starlette(routes=[Route("/slow", slow), Route("/stream", stream), Route("/healthz", healthz)])
    app.add_middleware(draining.DrainGuard)
    draining.reset()
    RELEASE.clear()
    try:
        with api_on_localhost(app=app) as url:
            try:
                yield url
            finally:
                RELEASE.set()  # before uvicorn stops: it waits for the requests in flight
    finally:
        draining.reset()


def wait_in_flight(count: int) -> None:
    deadline = time.monotonic() + 10
    while draining.in_flight() != count:
        assert time.monotonic() < deadline, f"{draining.in_flight()} in flight, expected {count}"
        time.sleep(0.01)


def test_a_request_in_flight_finishes_while_new_ones_are_refused(base):
    assert requests.get(base + "/healthz", timeout=10).status_code == 200
    with ThreadPoolExecutor(2) as pool:
        pending = [pool.submit(requests.get, base + "/slow", timeout=30) for _ in range(2)]
        wait_in_flight(2)
        assert draining.drain() == 2
        for path in ("/healthz", "/slow", "/no-such-route"):
            refused = requests.get(base + path, timeout=10)
            assert refused.status_code == 503, refused.text
            error = refused.json()["error"]
            assert (error["type"], error["param"], error["code"]) == ("server_error", None, "shutting_down")
            assert "shutting down" in error["message"]
            assert refused.headers["Retry-After"] == str(draining.SHUTTING_DOWN_RETRY_AFTER_S)
            assert refused.headers["Connection"] == "close"
        assert draining.drain() == 2  # the refused ones were never counted
        RELEASE.set()
        assert [p.result().json() for p in pending] == [{"done": True}] * 2
    wait_in_flight(0)
    assert draining.drain() == 0


def test_a_streamed_answer_counts_until_its_last_chunk(base):
    with requests.get(base + "/stream", stream=True, timeout=30) as response:
        lines = response.iter_lines()
        assert next(lines) == b"first"
        assert draining.drain() == 1  # its headers and first chunk are sent, its end is not
        RELEASE.set()
        assert list(lines) == [b"last"]
    wait_in_flight(0)


def test_the_api_counts_every_request_outside_its_own_layers():
    from serve.api import ModelAPI, app

    assert app.user_middleware[0].cls is draining.DrainGuard  # the first is the outermost
    assert callable(getattr(ModelAPI.func_or_class, "drain", None))  # what the runner broadcasts
