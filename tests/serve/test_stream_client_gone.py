"""A client that leaves a streamed answer while another client streams one: the flow of the one that left stops
reading its language model's stream at the model's next piece, which closes it (a model server stops writing for
nobody), while the other's answer streams to its end. Before, a flow whose model was reached through litellm (an
alias with an ``api_base``: vLLM, any OpenAI-compatible server) read the model's whole answer after its client had
gone, holding a thread of the replica all along.

The model is the local fault server's ``paced`` scenario (``operators.llm.testing``): a word every 50 ms, and it
counts the streams whose reader went away before their end. The chat of a finished task (``GET
/task/chat/{id}?stream=true``) over real HTTP on 127.0.0.1 (the service's FastAPI app under uvicorn); no Ray."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from tests.serve.conftest import api_on_localhost, finished_search, paced_model

pytestmark = pytest.mark.slow  # litellm's import, and a five-second answer

WORDS = 100  # 5 s at the fault server's pace


@pytest.fixture
def paced(tmp_path, monkeypatch):
    with paced_model(tmp_path, monkeypatch, WORDS) as server:
        yield server


@pytest.fixture
def chats(make_service, paced):
    """Two chats about one finished task (written to the store as a task worker writes it), with the paced model."""
    service = make_service()
    task_id = finished_search(service)
    with api_on_localhost() as base:
        made = [httpx.get(f"{base}/task/chat/new", params={"task_id": task_id, "model": "fault-paced"}, timeout=60)
                for _ in range(2)]
        assert all(m.status_code == 200 for m in made), [m.text for m in made]
        yield base, [m.text for m in made]


def stream(base: str, chat_id: str, leave: bool, seen: list) -> None:
    """Stream an answer; with ``leave``, close the connection once the first piece of text came."""
    params = {"message": "Which insects make honey?", "stream": True}
    with httpx.Client(timeout=120) as client, client.stream("GET", f"{base}/task/chat/{chat_id}", params=params) as got:
        for line in got.iter_lines():
            if line.startswith("data: "):
                seen.append(line.removeprefix("data: "))
                if leave and "text" in seen[-1]:
                    return


def test_a_client_leaving_a_streamed_answer_stops_its_models_stream_while_another_streams_on(chats, paced):
    base, (leaving, staying) = chats
    left, stayed = [], []
    threads = [threading.Thread(target=stream, args=(base, leaving, True, left)),
               threading.Thread(target=stream, args=(base, staying, False, stayed))]
    for thread in threads:
        thread.start()
    threads[0].join(timeout=60)
    deadline = time.monotonic() + 3  # well before the model's 5 s answer ends
    while not paced.left["paced"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert paced.left["paced"] == 1, "the model's stream went on after its client had left"
    threads[1].join(timeout=60)
    assert stayed[-1] == "[DONE]", stayed[-3:]
    reply = json.loads(stayed[-2])
    assert reply["answer"].startswith("bees0 bees1") and f"bees{WORDS - 1}" in reply["answer"], reply
    assert paced.attempts["paced"] == 2 and paced.left["paced"] == 1  # the other stream was read to its end
