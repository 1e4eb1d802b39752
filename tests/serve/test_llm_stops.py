"""The language-model deployment stops generating when nobody waits for the answer any more: a placed step's
call past its timeout, and an HTTP client that leaves a streamed chat. Both free the replica (llama.cpp decodes
one sequence at a time) for the next request. Observed through the deployment's own count of generation steps."""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlparse

import pytest

from operators import create
from operators.testing import sample_results

pytestmark = [pytest.mark.ray, pytest.mark.slow]

#: A prompt the 135M model answers at length (it counts on well past 400 tokens).
COUNT = "Count from 1 to 1000, one number after another, separated by commas."


def generation_steps() -> int:
    from ray import serve

    return serve.get_deployment_handle("smollm2", app_name="tessera").info.remote().result()["tokens"]


def settled() -> int:
    """The step count once it has stopped growing (the generation is over)."""
    before = generation_steps()
    while True:
        time.sleep(1.5)
        now = generation_steps()
        if now == before:
            return now
        before = now


@pytest.mark.parametrize("streamed", [False, True])
def test_a_placed_call_past_its_timeout_degrades_and_stops_the_generation(serve_app, streamed):
    from flows.placement import place
    from operators.generate.answer_stream import streaming_answers

    step = place(create("generate.answer", {"model": "local", "max_tokens": 400, "timeout": 1, "style": "sentences",
                                            "prompt": COUNT + " {query}"}, step_id="answer"),
                 deployment="smollm2")
    table = create("generate.context", {"max_context_length": 50})(sample_results(1, 1))
    before = settled()
    with streaming_answers(lambda qid, text: None) if streamed else _nothing():
        step(table)
    degraded = step.drain_metadata()["q1"]["degraded"]
    assert degraded["step"] == "answer" and "timeout" in degraded["reason"] and "within" in degraded["reason"]
    steps = settled() - before
    assert 0 < steps < 200, f"{steps} generation steps: it went on after the timeout"


def test_a_client_that_leaves_a_streamed_chat_stops_the_generation(serve_app):
    url = urlparse(serve_app)
    payload = json.dumps({"model": "smollm2", "stream": True, "max_tokens": 400,
                          "messages": [{"role": "user", "content": COUNT}]}).encode()
    before = settled()
    with socket.create_connection((url.hostname, url.port), timeout=60) as sock:
        sock.sendall((f"POST /v1/chat/completions HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json"
                      f"\r\nContent-Length: {len(payload)}\r\nConnection: close\r\n\r\n").encode() + payload)
        received = b""
        while received.count(b"data: ") < 5:  # the answer is being written
            received += sock.recv(4096)
    steps = settled() - before
    assert 5 <= steps < 200, f"{steps} generation steps: it went on after the client left"


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None
