"""``GET /task/{id}/chats``: a task's chats read back with what ``/task/chat/{id}`` kept of them, oldest first, as the
web UI reads a task's conversation after a reload (it had no way to, and a reload lost it). The service's FastAPI app
under uvicorn on 127.0.0.1 with a real SQLite task store and two keys; the finished task is written to the store as a
task worker writes it, and the chat's model is the fault server's (operators.llm.testing), a real HTTP model."""

from __future__ import annotations

import httpx
import pytest

from serve.service import Service
from serve.service_settings import ServiceArgs, key_hash, resolve
from tests.serve.conftest import api_on_localhost

ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"
ROWS = [{"qid": "1", "docno": "bees#0", "title": "Bees", "text": "Honey bees make honey from nectar.", "score": 1.0,
         "rank": 1}]


@pytest.fixture
def keyed(tmp_path, monkeypatch, fault_models):
    """The API with alice's and bob's keys, and alice's finished task: (base URL, service, task id)."""
    home = tmp_path / "home"
    (home / "indices" / "news").mkdir(parents=True)
    (home / "indices" / "news" / "manifest.json").write_text("{}")
    monkeypatch.setenv("TESSERA_HOME", str(home))
    args = ServiceArgs(default_index=str(home / "indices" / "news"), task_store=f"sqlite:///{tmp_path / 'tasks.db'}",
                       spare_task_workers=0, api_keys=[{"id": "alice", "sha256": key_hash(ALICE)},
                                                       {"id": "bob", "sha256": key_hash(BOB)}])
    config = resolve(args, environ={})
    service = Service(config, [], "tessera")
    service.warming.join(timeout=120)
    task_id = service.store.create_task("alice", "bm25", {"steps": {}}, [{"qid": "1", "query": "honey"}], ["bm25"])
    service.store.finish(task_id, "finished", result={"data": ROWS, "result_description": {}, "aggregated_data": {},
                                                      "metadata": {}})
    with api_on_localhost(config["keys"]) as url:
        yield url, task_id


def call(url: str, key: str, **params) -> httpx.Response:
    return httpx.get(url, params=params, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def test_a_tasks_chats_are_read_back_with_their_messages_and_only_by_its_key(keyed):
    base, task_id = keyed
    chats = f"{base}/task/{task_id}/chats"
    assert call(chats, ALICE).json() == {"task_id": task_id, "chats": []}  # none asked yet
    first = call(f"{base}/task/chat/new", ALICE, task_id=task_id, model="fault-ok").text
    replies = [call(f"{base}/task/chat/{first}", ALICE, message=question).json()
               for question in ("Which insects make honey?", "How do they make it?")]
    second = call(f"{base}/task/chat/new", ALICE, task_id=task_id, model="fault-ok").text

    read = call(chats, ALICE)
    assert read.status_code == 200, read.text
    body = read.json()
    assert [chat["id"] for chat in body["chats"]] == [first, second]  # oldest first
    kept = body["chats"][0]
    assert (kept["model"], kept["column"]) == ("fault-ok", "text")
    assert [m["role"] for m in kept["messages"]] == ["user", "assistant", "user", "assistant"]
    assert [m["content"] for m in kept["messages"][::2]] == ["Which insects make honey?", "How do they make it?"]
    for message, reply in zip(kept["messages"][1::2], replies):
        assert (message["answer"], message["sources"]) == (reply["answer"], reply["sources"]) == (
            "Honey bees make honey [1].", ["bees#0"])
    assert kept["messages"][3]["standalone_query"] == replies[1]["standalone_query"]
    assert body["chats"][1]["messages"] == []

    for url, key in ((chats, BOB), (f"{base}/task/nope/chats", ALICE)):  # another key's task, or none
        refused = call(url, key)
        assert refused.status_code == 404 and refused.json()["error"]["message"] == "Task id not found", refused.text


def test_a_long_question_is_asked_in_a_body_where_the_url_could_not_hold_it(keyed):
    """The web UI sent the question in the URL: 9,000 CJK characters (81,000 bytes percent-encoded, under
    max_query_chars) were an HTTP 400 "Invalid HTTP request received." from the server, naming nothing. POST takes
    it in a JSON body, streamed as the GET is; one over the limit is the 422 naming message."""
    base, task_id = keyed
    headers = {"Authorization": f"Bearer {ALICE}"}
    chat = call(f"{base}/task/chat/new", ALICE, task_id=task_id, model="fault-ok").text
    long = "蜜" * 9000
    asked = httpx.post(f"{base}/task/chat/{chat}", json={"message": long, "stream": True}, headers=headers,
                       timeout=60)
    assert asked.status_code == 200, asked.text
    events = [line[5:].strip() for line in asked.text.splitlines() if line.startswith("data:")]
    assert events[-1] == "[DONE]" and '"answer"' in events[-2]
    over = httpx.post(f"{base}/task/chat/{chat}", json={"message": "蜜" * 10_001}, headers=headers, timeout=60)
    error = over.json()["error"]
    assert (over.status_code, error["param"]) == (422, "message") and "max_query_chars" in error["message"], error
    odd = httpx.post(f"{base}/task/chat/{chat}", json={"message": "x", "stream": "yes"}, headers=headers, timeout=60)
    assert (odd.status_code, odd.json()["error"]["param"]) == (422, "stream")
    messages = call(f"{base}/task/{task_id}/chats", ALICE).json()["chats"][0]["messages"]
    assert messages[0]["content"] == long  # kept as asked
