"""A client that goes away stops the flow it asked for: search, OpenAI's chat (whole or streamed) and Cohere's
chat, on the package's Serve app. The flow's slow step calls a local server; once the client has closed its
connection, that server sees no more than the call in flight."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlparse

import pytest
import requests

pytestmark = [pytest.mark.ray, pytest.mark.slow]

QUESTION = [{"role": "user", "content": "which insects make honey and pollinate flowers"}]


def ask_and_leave(base: str, path: str, body: dict, slow_rerank) -> float:
    """POST ``body`` on a raw socket, close it while the slow step works; when it was closed."""
    url = urlparse(base)
    payload = json.dumps(body).encode()
    head = (f"POST {path} HTTP/1.1\r\nHost: {url.hostname}:{url.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode()
    slow_rerank.times.clear()
    with socket.create_connection((url.hostname, url.port), timeout=60) as sock:
        sock.sendall(head + payload)
        deadline = time.monotonic() + 120
        while len(slow_rerank.times) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(slow_rerank.times) >= 3, "the slow step never started"
    return time.monotonic()


@pytest.fixture
def slow_rag(serve_app, slow_rerank) -> str:
    """A saved flow that answers after a slow rerank of 40 candidates (10 s, one request at a time)."""
    flow = slow_rerank.slow_flow()
    flow["name"] = "slow_rag"
    flow["steps"].update({"context": {"op": "generate.context"},
                          "answer": {"op": "generate.answer", "params": {"model": "local", "max_tokens": 8}}})
    assert requests.put(f"{serve_app}/flows/slow_rag", json=flow, timeout=60).status_code == 201
    return "slow_rag"


@pytest.mark.parametrize("path,stream", [("/v1/search", False), ("/v1/chat/completions", False),
                                         ("/v1/chat/completions", True), ("/v2/chat", False)])
def test_a_client_that_goes_away_stops_its_flow(serve_app, slow_rerank, slow_rag, path, stream):
    if path == "/v1/search":
        body = {"flow": slow_rerank.slow_flow(), "query": QUESTION[0]["content"]}
    else:
        body = {"model": slow_rag, "messages": QUESTION, "stream": stream}
    gone = ask_and_leave(serve_app, path, body, slow_rerank)
    time.sleep(6)
    late = [t for t in slow_rerank.times if t > gone + 5]
    assert late == [], f"{len(late)} requests of the slow step arrived more than 5 s after the client left"
    assert len(slow_rerank.times) < 40  # the flow did not run to its end
