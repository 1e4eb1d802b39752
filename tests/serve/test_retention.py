"""Tasks and chats do not pile up: ended tasks older than ``task_retention_days`` go with their chats (at the
service's start, then hourly), and ``DELETE /task/{id}`` deletes one of the caller's ended tasks (409 while it
runs, 404 for another key's). An index's latest ingestion task stays. Real SQLite and PostgreSQL stores; the
route over real HTTP (the API's app under uvicorn on 127.0.0.1, beside a real ``Service``)."""

from __future__ import annotations

import time

import pytest
import requests

from serve.security import auth
from serve.tasks.retention import delete_task, prune
from serve.service_settings import ServiceArgs, resolve
from serve.tasks.taskstore import TaskStore
from tests.serve.conftest import api_on_localhost

DAY = 86400


def ended_task(store: TaskStore, owner: str = "alice", *, status: str = "finished", days_ago: float = 0) -> str:
    """A task that ended ``days_ago`` (its ``updated`` time), with a chat about it."""
    from serve.tasks.taskstore import tasks

    task_id = store.create_task(owner, "flow", {}, [{"qid": "1", "query": "q"}], ["a"])
    store.finish(task_id, status, result={"data": [{"text": "x" * 100}]} if status == "finished" else None)
    with store.engine.begin() as conn:
        conn.execute(tasks.update().where(tasks.c.id == task_id).values(updated=time.time() - days_ago * DAY))
    store.create_chat(owner, task_id, "smollm2", "text")
    return task_id


def chats_of(store: TaskStore, task_id: str) -> int:
    import sqlalchemy as sa

    from serve.tasks.taskstore import chats

    with store.engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(chats).where(chats.c.task_id == task_id)).scalar()


def test_prune_deletes_ended_tasks_past_retention_with_their_chats(store_url):
    store = TaskStore(store_url)
    old = [ended_task(store, status=status, days_ago=40) for status in ("finished", "failed", "cancelled")]
    recent = ended_task(store, days_ago=5)
    running = store.create_task("alice", "flow", {}, [], ["a"])
    store.update(running, status="running")
    ingest, _ = store.create_ingest_task("alice", "notes", "ingest", {"documents": 1}, ["a"], limit=4)
    store.finish(ingest, "finished")
    with store.engine.begin() as conn:  # everything else is as old as the old tasks
        from serve.tasks.taskstore import tasks

        conn.execute(tasks.update().where(tasks.c.id.in_([running, ingest])).values(updated=time.time() - 40 * DAY))

    assert prune(store, 0) == 0 and prune(store, None) == 0  # keep forever
    assert prune(store, 30) == 3
    assert [store.task(task_id, None) for task_id in old] == [None, None, None]
    assert [chats_of(store, task_id) for task_id in old] == [0, 0, 0]
    assert {t["id"] for t in store.list_tasks("alice")} == {recent, running, ingest}  # the index reads its ingestion
    assert chats_of(store, recent) == 1
    assert prune(store, 30) == 0


def test_delete_task_is_the_owners_and_only_once_ended(store_url):
    store = TaskStore(store_url)
    done = ended_task(store)
    running = store.create_task("alice", "flow", {}, [], ["a"])
    ingest, _ = store.create_ingest_task("alice", "notes", "ingest", {"documents": 1}, ["a"], limit=4)
    store.finish(ingest, "failed", error="x")
    assert delete_task(store, done, "bob") == "missing"
    assert delete_task(store, running, "alice") == "unfinished"
    assert delete_task(store, ingest, "alice") == "index:notes"
    assert delete_task(store, done, "alice") == "ok"
    assert store.task(done, None) is None and chats_of(store, done) == 0
    assert delete_task(store, done, "alice") == "missing"


def test_retention_is_a_setting_kept_30_days_by_default():
    assert ServiceArgs().task_retention_days == 30
    assert resolve(ServiceArgs(task_retention_days=0), environ={})["task_retention_days"] == 0
    with pytest.raises(ValueError, match="task_retention_days"):
        ServiceArgs(task_retention_days=-1)


@pytest.fixture
def api(tmp_path, monkeypatch):
    """The API's app on uvicorn beside a ``Service`` whose store holds old tasks; no keys (the ``local`` tenant)."""
    from serve.service import Service

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    store = TaskStore(url)
    old, kept = ended_task(store, "local", days_ago=10), ended_task(store, "local", days_ago=1)
    args = ServiceArgs(default_index=None, task_store=url, spare_task_workers=0, task_retention_days=7)
    service = Service(resolve(args, environ={}), [], "tessera")
    assert service.pruner.first_round.wait(60)
    auth.configure({}, None, None)
    with api_on_localhost() as base:
        yield base, service, old, kept
    service.pruner.stop()


def test_the_service_prunes_at_start_and_the_owner_deletes_an_ended_task(api):
    base, service, old, kept = api
    assert service.store.task(old, None) is None  # pruned at the start: ended 10 days ago, kept 7
    listed = requests.get(base + "/tasks", timeout=30).json()["tasks"]
    assert [t["id"] for t in listed] == [kept]

    running = service.store.create_task("local", "flow", {}, [], ["a"])
    refused = requests.delete(f"{base}/task/{running}", timeout=30)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "task_unfinished", refused.text
    others = ended_task(service.store, "bob")
    hidden = requests.delete(f"{base}/task/{others}", timeout=30)
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "task_not_found", hidden.text
    assert service.store.task(others, None) is not None

    deleted = requests.delete(f"{base}/task/{kept}", timeout=30)
    assert deleted.status_code == 200 and deleted.json() == {"task_id": kept, "deleted": True}, deleted.text
    assert requests.get(f"{base}/task/progress/{kept}", timeout=30).status_code == 404
    assert requests.delete(f"{base}/task/{kept}", timeout=30).status_code == 404
