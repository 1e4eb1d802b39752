"""A search answers while more streamed chats than the event loop's default pool has threads wait on their model:
the answers run on threads of their own (serve/http/threads.py). Before, each streamed chat held a thread of the default
pool (min(32, CPUs + 4): six on 2 cores) for its whole answer, and a bm25 search waited for one (7.6 s behind eight
chats on 2 cores). A chat beyond ``answer_threads`` + ``answer_queue`` is refused with a 503 and ``Retry-After``
before it starts, and the slots of ended chats come back. A search whose flow calls a language model
(``generate.answer``) is an answer too: it runs on those threads, with the same 503; before, such searches held the
default pool and a bm25 search waited behind them as it did behind chats.

The model is the local fault server's ``slow`` scenario (``operators.llm.testing``), which answers only once the test
releases it, so every chat is open while the search runs. A real BM25 index, a real SQLite task store, and the
service's FastAPI app under uvicorn on 127.0.0.1 with real HTTP; no Ray."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from flows.spec import FlowSpec
from operators.llm.testing import KEY_ENV, FaultServer
from serve.service import Service
from serve.service_settings import ANSWER_THREADS, ServiceArgs, resolve
from serve.http.threads import calls_model
from tests.serve.conftest import api_on_localhost, finished_search, uploaded_index

#: The event loop's default pool on this machine, which the answers used to share with every other request.
OLD_POOL = min(32, (os.cpu_count() or 1) + 4)
CHATS = OLD_POOL + 1


@pytest.fixture
def app(tmp_path, monkeypatch):
    """The API with ``CHATS`` answer threads and no queue, the index ``notes``, a finished task to chat about, and
    the fault server's models; its base URL, the task id and the fault server."""
    with FaultServer(delay=300) as fault:
        monkeypatch.setenv("TESSERA_MODELS", str(fault.models_file(tmp_path / "models.yaml")))
        monkeypatch.setenv(KEY_ENV, "sk-fault-test")
        monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
        args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0,
                           answer_threads=CHATS, answer_queue=0)
        service = Service(resolve(args, environ={}), [], "tessera")
        uploaded_index(service)
        task_id = finished_search(service)
        with api_on_localhost() as base:
            yield base, task_id, fault


def new_chat(base: str, task_id: str) -> str:
    made = httpx.get(f"{base}/task/chat/new", params={"task_id": task_id, "model": "fault-slow"}, timeout=60)
    assert made.status_code == 200, made.text
    return made.text


def streamed(base: str, chat_id: str, seen: list[str]) -> None:
    """A streamed answer to the chat, each ``data:`` line into ``seen``."""
    params = {"message": "Which insects make honey?", "stream": True}
    with httpx.stream("GET", f"{base}/task/chat/{chat_id}", params=params, timeout=300) as got:
        seen.append(str(got.status_code))
        seen.extend(line.removeprefix("data: ") for line in got.iter_lines() if line.startswith("data: "))


def open_chats(base: str, task_id: str, fault: FaultServer, at_least: int) -> tuple[list[threading.Thread], list]:
    """``CHATS`` streamed chats, started once ``at_least`` of them are waiting on their model."""
    ids = [new_chat(base, task_id) for _ in range(CHATS)]
    seen: list[list[str]] = [[] for _ in ids]
    chats = [threading.Thread(target=streamed, args=(base, chat_id, into)) for chat_id, into in zip(ids, seen)]
    for chat in chats:
        chat.start()
    deadline = time.monotonic() + 120
    while fault.attempts["slow"] < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fault.attempts["slow"] >= at_least, f"{fault.attempts['slow']} of {CHATS} chats reached their model"
    return chats, seen


def assert_refused(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"].isdigit(), response.headers
    error = response.json()["error"]
    assert error["code"] == "too_many_answers" and "answer_threads" in error["message"], error


@pytest.mark.slow  # an index, a service, litellm's import and 2 x CHATS chats: about 15 s on 2 cores
def test_a_search_answers_while_more_chats_than_the_default_pool_stream(app):
    base, task_id, fault = app
    chats, seen = open_chats(base, task_id, fault, at_least=OLD_POOL)  # the default pool's every thread, before

    searched = httpx.post(f"{base}/v1/search", json={"flow": "bm25", "query": "honey", "index": "notes"}, timeout=30)
    assert searched.status_code == 200, searched.text
    assert searched.json()["results"][0]["hits"][0]["docno"] == "bees#0"
    assert all(chat.is_alive() for chat in chats) and not fault.release.is_set()  # every chat still open

    deadline = time.monotonic() + 60
    while fault.attempts["slow"] < CHATS and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fault.attempts["slow"] == CHATS, "the chats did not all wait on their model at once"
    one_more = new_chat(base, task_id)  # every answer thread is taken and answer_queue is 0
    assert_refused(httpx.get(f"{base}/task/chat/{one_more}", params={"message": "Bees?", "stream": True}, timeout=30))
    assert_refused(httpx.get(f"{base}/task/chat/{one_more}", params={"message": "Bees?"}, timeout=30))

    fault.release.set()
    for chat, lines in zip(chats, seen):
        chat.join(timeout=120)
        assert lines[0] == "200" and lines[-1] == "[DONE]", lines[-3:]
        assert json.loads(lines[-2])["answer"].startswith("Honey bees make honey"), lines[-2]

    fault.release.clear()  # the ended chats gave their slots back: as many are admitted again, and no more
    chats, seen = open_chats(base, task_id, fault, at_least=2 * CHATS)
    assert_refused(httpx.get(f"{base}/task/chat/{one_more}", params={"message": "Bees?", "stream": True}, timeout=30))
    fault.release.set()
    for chat, lines in zip(chats, seen):
        chat.join(timeout=120)
        assert lines[0] == "200" and lines[-1] == "[DONE]", lines[-3:]


#: A search that writes an answer with the slow model: what ``rag`` does, on the index ``notes``.
ANSWERING = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 2}},
                       "context": {"op": "generate.context", "params": {"model": "fault-slow"}},
                       "answer": {"op": "generate.answer", "params": {"model": "fault-slow"}}}}


def answering_search(base: str, seen: list[httpx.Response]) -> None:
    seen.append(httpx.post(f"{base}/v1/search", json={"flow": ANSWERING, "query": "Which insects make honey?",
                                                      "index": "notes"}, timeout=300))


@pytest.mark.slow  # an index, a service, litellm's import and CHATS searches on the slow model: about 10 s on 2 cores
def test_a_search_answers_while_more_searches_that_write_answers_than_the_default_pool_wait(app):
    base, _, fault = app
    seen: list[list[httpx.Response]] = [[] for _ in range(CHATS)]
    searches = [threading.Thread(target=answering_search, args=(base, into)) for into in seen]
    for search in searches:
        search.start()
    deadline = time.monotonic() + 45  # within the model's timeout (60 s), after which a call is tried again
    while fault.attempts["slow"] < CHATS and time.monotonic() < deadline:  # before: OLD_POOL at most
        time.sleep(0.05)
    assert fault.attempts["slow"] == CHATS, f"{fault.attempts['slow']} of {CHATS} answering searches reached the model"

    searched = httpx.post(f"{base}/v1/search", json={"flow": "bm25", "query": "honey", "index": "notes"}, timeout=20)
    assert searched.status_code == 200, searched.text
    assert searched.json()["results"][0]["hits"][0]["docno"] == "bees#0"
    assert_refused(httpx.post(f"{base}/v1/search", json={"flow": ANSWERING, "query": "Bees?", "index": "notes"},
                              timeout=30))  # every answer thread is taken and answer_queue is 0

    fault.release.set()
    for search, answered in zip(searches, seen):
        search.join(timeout=120)
        assert answered[0].status_code == 200, answered[0].text
        metadata = answered[0].json()["results"][0]["metadata"]
        assert metadata["answer"].startswith("Honey bees make honey"), metadata
    again = httpx.post(f"{base}/v1/search", json={"flow": ANSWERING, "query": "Bees?", "index": "notes"}, timeout=60)
    assert again.status_code == 200, again.text  # the ended searches gave their slots back
    # the service runs flows without the step cache (docs/caching.md), cacheable steps (temperature 0) included
    assert not (Path(os.environ["TESSERA_HOME"]) / "cache").exists()


@pytest.mark.parametrize("steps, waits", [
    ({"bm25": {"op": "retrieve.bm25"}, "context": {"op": "generate.context"}}, False),  # a tokenizer, no call
    ({"standalone": {"op": "query.contextualize"}, "bm25": {"op": "retrieve.bm25"}}, False),  # history: no model
    ({"standalone": {"op": "query.contextualize", "params": {"method": "llm"}}, "bm25": {"op": "retrieve.bm25"}},
     True),
    ({"hops": {"op": "retrieve.multi_hop", "params": {"index": "notes", "follow_up": "llm"}}}, True),
    ({"hops": {"op": "retrieve.multi_hop", "params": {"index": "notes"}}}, False),
    ({"m": {"op": "retrieve.multi_collection", "params": {"collections": [{"name": "a", "index": "notes"}],
                                                          "postprocess": [{"op": "rerank.llm_group"}]}}}, True),
    ({"bm25": {"op": "retrieve.bm25"}, "context": {"op": "generate.context"}, "answer": {"op": "generate.answer"}},
     True),
], ids=["context", "history", "contextualize-llm", "multi-hop-llm", "multi-hop-titles", "nested-llm-rerank", "rag"])
def test_a_flow_waits_on_a_model_when_a_step_it_runs_calls_one(steps, waits):
    """What puts a search on the answers' threads (``serve.http.threads.calls_model``): the steps that call a model with
    their params, also inside another step."""
    assert calls_model(FlowSpec.parse({"steps": steps}).build()) is waits


def test_the_answer_pools_settings_default_and_refuse_a_pool_without_threads():
    resolved = resolve(ServiceArgs(default_index=None, task_store="sqlite:///unused.db"), environ={})
    assert (resolved["answer_threads"], resolved["answer_queue"]) == (ANSWER_THREADS, ANSWER_THREADS)
    with pytest.raises(ValidationError, match="answer_threads"):
        ServiceArgs(answer_threads=0)
