"""A task deleted (``DELETE /task/{id}``, with its chats) while a message to one of its chats is answered: the message
gets the 404 ``chat_not_found`` of a chat that is gone (an error event when streamed), not a 500 from keeping the
exchange in a chat row that no longer exists, and the service answers as before.

The race is made to happen: the chat's language model is the local fault server's ``slow`` scenario
(``operators.llm.testing``), which holds its answer until the test has deleted the task over HTTP. The service's
FastAPI app under uvicorn on 127.0.0.1 with a real SQLite task store; the finished task is written to the store as a
task worker writes it (no Ray)."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from operators.llm.testing import KEY_ENV, FaultServer
from tests.serve.conftest import api_on_localhost, finished_search

pytestmark = pytest.mark.slow  # litellm (the chat's model calls) takes about 5 s to import


@pytest.fixture
def slow_llm(tmp_path, monkeypatch):
    with FaultServer(reply="Honey bees make it [1].", delay=60) as server:
        monkeypatch.setenv("TESSERA_MODELS", str(server.models_file(tmp_path / "models.yaml")))
        monkeypatch.setenv(KEY_ENV, "sk-fault-test")
        yield server


@pytest.fixture
def base(make_service, slow_llm):
    service = make_service()
    task_id = finished_search(service)
    with api_on_localhost() as url:
        yield url, task_id


def asked_while_deleted(base: str, task_id: str, slow_llm: FaultServer, stream: bool) -> httpx.Response:
    """Ask a new chat of the task; once the model has the question, delete the task, then let the model answer."""
    made = httpx.get(f"{base}/task/chat/new", params={"task_id": task_id, "model": "fault-slow"}, timeout=60)
    assert made.status_code == 200, made.text
    answered: list[httpx.Response] = []

    def ask() -> None:
        with httpx.Client(timeout=120) as client:
            response = client.get(f"{base}/task/chat/{made.text}",
                                  params={"message": "Which insects make honey?", "stream": stream})
            answered.append(response)

    asking = threading.Thread(target=ask)
    asking.start()
    deadline = time.monotonic() + 60
    while not slow_llm.attempts["slow"]:
        assert time.monotonic() < deadline and asking.is_alive(), answered and answered[0].text
        time.sleep(0.02)
    deleted = httpx.delete(f"{base}/task/{task_id}", timeout=60)
    assert deleted.status_code == 200, deleted.text
    slow_llm.release.set()
    asking.join(timeout=120)
    assert answered, "the chat message got no answer"
    return answered[0]


def test_a_message_to_a_chat_deleted_with_its_task_meanwhile_is_a_404(base, slow_llm):
    url, task_id = base
    answer = asked_while_deleted(url, task_id, slow_llm, stream=False)
    assert answer.status_code == 404, answer.text
    assert (answer.json()["error"]["param"], answer.json()["error"]["code"]) == ("chat_id", "chat_not_found")
    assert httpx.get(f"{url}/tasks", timeout=60).json()["tasks"] == []  # the service goes on


def test_a_streamed_message_to_a_chat_deleted_meanwhile_ends_with_the_404_as_an_event(base, slow_llm):
    url, task_id = base
    answer = asked_while_deleted(url, task_id, slow_llm, stream=True)
    assert answer.status_code == 200, answer.text  # the stream's headers went before the answer was written
    events = [line.removeprefix("data: ") for line in answer.text.splitlines() if line.startswith("data: ")]
    assert events and events[-1] != "[DONE]", answer.text
    assert json.loads(events[-1])["error"]["code"] == "chat_not_found", answer.text
    assert httpx.get(f"{url}/tasks", timeout=60).json()["tasks"] == []
