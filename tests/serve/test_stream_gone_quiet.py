"""A client that leaves a streamed flow answer leaves no traceback in the service's log, and its flow stops.

Found by ``benchmarks/serve_soak.py --only cut_rag`` (streamed ``rag`` chats whose client closes the socket after the
first bytes): the api replica logged asyncio's "Task exception was never retrieved" with the traceback of an expected
``FlowCancelled`` raised in ``generate.answer``. Serve cancels the model's call of a request whose client left, and the
flow's thread raised ``FlowCancelled`` before the handler's own cancel came: the stream's generator raised it out of
a started response, whose task Serve no longer reads. The second test makes that order here: the flow is cancelled
(its ``CancelToken``, as Serve's cancel of the model call ends it) while the handler still streams; before, the
exception left the app (uvicorn logs "Exception in ASGI application"), now the stream ends with an error event. The
model is the local fault server's ``paced`` scenario
(``operators.llm.testing``): a word every 50 ms, and it counts the streams whose reader went away. The chat of a
finished task (``GET /task/chat/{id}?stream=true``, the ``rag`` flow's answer path, streamed by the same
``chat_flows`` code as ``/v1/chat/completions``) over real HTTP on 127.0.0.1 (the service's app under uvicorn);
no Ray."""

from __future__ import annotations

import gc
import json
import logging
import time

import httpx
import pytest

from flows.progress import CancelToken
from serve.chat import chat_flows
from tests.serve.conftest import api_on_localhost, finished_search, paced_model

pytestmark = pytest.mark.slow  # litellm's import, and a model that writes for seconds

WORDS = 200  # 10 s at the fault server's pace: the client leaves long before the end


@pytest.fixture
def chat(tmp_path, monkeypatch, make_service):
    with paced_model(tmp_path, monkeypatch, WORDS) as server:
        service = make_service()
        task_id = finished_search(service)
        with api_on_localhost() as base:
            made = httpx.get(f"{base}/task/chat/new", params={"task_id": task_id, "model": "fault-paced"}, timeout=60)
            assert made.status_code == 200, made.text
            yield base, made.text, server


def tracebacks(records: list[logging.LogRecord]) -> str:
    """What the records say that a client leaving must not log: tracebacks, a task nobody read, FlowCancelled."""
    logged = "\n".join(f"{r.name}: {r.getMessage()} {r.exc_text or ''}" for r in records)
    words = ("Traceback", "never retrieved", "FlowCancelled")
    bad = any(r.exc_info for r in records) or any(w in logged for w in words)
    return logged if bad else ""


def leave_after_first_text(base: str, chat_id: str) -> None:
    """Stream an answer and close the connection once its first piece of text came."""
    params = {"message": "Which insects make honey?", "stream": True}
    with httpx.Client(timeout=120) as client, client.stream("GET", f"{base}/task/chat/{chat_id}", params=params) as got:
        assert got.status_code == 200
        for line in got.iter_lines():
            if line.startswith("data: ") and '"text"' in line:
                return
    raise AssertionError("the stream ended before its first piece of text")


def test_a_client_leaving_a_streamed_flow_answer_logs_no_traceback_and_stops_the_flow(chat, caplog):
    base, chat_id, paced = chat
    caplog.set_level(logging.DEBUG)
    for _ in range(3):
        leave_after_first_text(base, chat_id)
    deadline = time.monotonic() + 8  # before the model's 10 s answer ends
    while paced.left["paced"] < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert paced.left["paced"] == 3, "the model's stream went on after its client had left"
    time.sleep(0.5)  # the flows' threads end after their model's stream closed
    gc.collect()  # a task whose exception nobody read is logged when it is collected
    assert not tracebacks(caplog.records)


def test_a_flow_cancelled_while_its_answer_streams_ends_the_stream_with_an_event_not_a_traceback(chat, caplog,
                                                                                               monkeypatch):
    base, chat_id, paced = chat
    tokens: list[CancelToken] = []

    class Seen(CancelToken):  # the real token, kept where the test can cancel it as Serve's cancel of the call does
        def __init__(self) -> None:
            super().__init__()
            tokens.append(self)

    monkeypatch.setattr(chat_flows, "CancelToken", Seen)
    caplog.set_level(logging.DEBUG)
    params = {"message": "Which insects make honey?", "stream": True}
    events = []
    with httpx.Client(timeout=120) as client, client.stream("GET", f"{base}/task/chat/{chat_id}", params=params) as got:
        assert got.status_code == 200
        for line in got.iter_lines():
            if line.startswith("data: "):
                events.append(line.removeprefix("data: "))
                if len(events) == 1:
                    assert '"text"' in events[0] and len(tokens) == 1, events
                    tokens[0].cancel("the request that made this call was cancelled")
    deadline = time.monotonic() + 8  # before the model's 10 s answer ends
    while not paced.left["paced"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert paced.left["paced"] == 1, "the model's stream went on after its flow was cancelled"
    error = json.loads(events[-1])["error"]  # the stream's end: an event, as a started stream's errors are
    assert error["code"] == "cancelled" and "the request that made this call was cancelled" in error["message"], error
    time.sleep(0.5)
    gc.collect()
    assert not tracebacks(caplog.records)


def test_a_flow_cancelled_while_an_unstreamed_answer_is_written_is_a_499_not_a_500_with_a_traceback(chat, caplog,
                                                                                                   monkeypatch):
    from serve.http import client_gone

    base, chat_id, paced = chat

    class Cancelled(CancelToken):  # the real token, cancelled at once as Serve cancels a request's calls
        def __init__(self) -> None:
            super().__init__()
            self.cancel("the request that made this call was cancelled")

    monkeypatch.setattr(client_gone, "CancelToken", Cancelled)
    caplog.set_level(logging.DEBUG)
    answered = httpx.get(f"{base}/task/chat/{chat_id}", params={"message": "Which insects make honey?"}, timeout=120)
    assert answered.status_code == 499, answered.text
    error = answered.json()["error"]
    assert error["code"] == "cancelled" and "the request that made this call was cancelled" in error["message"], error
    assert paced.attempts["paced"] == 0  # the flow stopped before its model
    gc.collect()
    assert not tracebacks(caplog.records)
