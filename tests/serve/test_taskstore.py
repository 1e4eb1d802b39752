"""The task store on real SQLite files and a real PostgreSQL server (the cluster configs' store): state only moves
forward, owners never see each other's rows, two processes' writes interleave without losing one, and racing
enqueues and uploads admit exactly what they may."""

from __future__ import annotations

import subprocess
import sys

import pytest
import sqlalchemy as sa

from serve.tasks.taskstore import TaskStore


def new_task(store: TaskStore, owner: str = "alice", steps=("a", "b", "c")) -> str:
    return store.create_task(owner, "flow", {"steps": {}}, [{"qid": "1", "query": "q"}], list(steps))


def test_sqlite_runs_in_wal_mode(tmp_path):
    store = TaskStore(f"sqlite:///{tmp_path / 'deep' / 'tasks.db'}")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_a_final_task_refuses_every_later_write(store_url):
    store = TaskStore(store_url)
    task_id = new_task(store)
    progress = {"a": {"status": "done", "rows_in": 1, "rows_out": 2, "seconds": 0.1},
                "b": {"status": "running", "rows_in": 0, "rows_out": 0, "seconds": 0.0},
                "c": {"status": "pending", "rows_in": 0, "rows_out": 0, "seconds": 0.0}}
    assert store.update(task_id, status="running", steps_done=1, current_step="b", step_progress=progress,
                        log="step b started")
    assert store.finish(task_id, "cancelled", log="cancelled by the client")
    before = store.task(task_id, "alice")
    assert not store.update(task_id, steps_done=3, log="late write")
    assert not store.finish(task_id, "finished", result={"data": []})
    after = store.task(task_id, "alice")
    assert after == before and after["status"] == "cancelled" and after["result"] is None
    statuses = {s: info["status"] for s, info in after["step_progress"].items()}
    assert statuses == {"a": "done", "b": "interrupted", "c": "interrupted"}
    assert after["steps_done"] == 1 and after["log"][-1] == "cancelled by the client"


def test_a_finished_task_has_every_step_done(store_url):
    store = TaskStore(store_url)
    task_id = new_task(store)
    assert store.finish(task_id, "finished", result={"data": [{"docno": "d1"}]})
    task = store.task(task_id, "alice")
    assert task["steps_done"] == 3 and {i["status"] for i in task["step_progress"].values()} == {"done"}


def test_owners_see_only_their_own_tasks_and_chats(store_url):
    store = TaskStore(store_url)
    mine, theirs = new_task(store, "alice"), new_task(store, "bob")
    assert store.task(mine, "alice") is not None and store.task(mine, "bob") is None
    assert [t["id"] for t in store.list_tasks("bob")] == [theirs]
    assert store.status_counts("alice") == {"queued": 1} and store.status_counts("bob") == {"queued": 1}
    chat = store.create_chat("alice", mine, "local", "text")
    assert store.chat(chat, "alice")["task_id"] == mine and store.chat(chat, "bob") is None


WRITER = """
import sys
from serve.tasks.taskstore import TaskStore
store = TaskStore(sys.argv[1])
print("ready", flush=True)
sys.stdin.read()  # closed by the test process: both start appending together
for i in range(40):
    store.update(sys.argv[2], log=f"line {i}")
"""


@pytest.mark.process
def test_two_processes_append_without_losing_a_line(store_url):
    """This process and a second one append 40 log lines each to one task at once (one process started rather
    than two: the second's imports cost a second of CPU)."""
    url = store_url
    store = TaskStore(url)
    task_id = new_task(store)
    other = subprocess.Popen([sys.executable, "-c", WRITER, url, task_id], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        ready = other.stdout.readline()  # its store open: what is left is the appends
    finally:
        other.stdin.close()
    assert ready == "ready\n"
    for i in range(40):
        assert store.update(task_id, log=f"line {i} of the test process")
    assert other.wait(120) == 0
    assert len(store.task(task_id, None)["log"]) == 1 + 80


def test_any_sqlalchemy_url_works(tmp_path):
    """A URL that is not the default file (here SQLite in memory through a shared-cache name) creates its tables."""
    store = TaskStore("sqlite://")
    assert set(sa.inspect(store.engine).get_table_names()) >= {"tasks", "chats"}


def test_the_per_key_limit_lets_exactly_limit_concurrent_enqueues_in(store_url):
    """Sixteen threads, each with its own engine on one store (as replicas are), enqueue at once for one
    key with a limit of 3: exactly 3 tasks exist afterwards, and another key is not counted against it."""
    import threading

    url = store_url
    TaskStore(url)  # the schema, before the threads race
    new_task(TaskStore(url), "bob")
    start, got = threading.Barrier(16), []

    def enqueue() -> None:
        start.wait()
        got.append(created(TaskStore(url), "alice", limit=3))

    race(enqueue, 16)
    store = TaskStore(url)
    admitted = [task_id for task_id in got if task_id not in ("limit", "max_tasks")]
    assert len(got) == 16 and len(admitted) == 3 and got.count("limit") == 13
    assert sorted(t["id"] for t in store.list_tasks("alice")) == sorted(admitted)
    assert created(store, "bob", limit=2) != "limit"
    assert created(store, "bob", limit=2) == "limit"
    store.finish(admitted[0], "finished")
    assert created(store, "alice", limit=3) != "limit"


def created(store: TaskStore, owner: str, **limits: int) -> str:
    """A new task's id, or why the store refused it (``TasksAtLimit.why``)."""
    from serve.tasks.taskstore import TasksAtLimit

    try:
        return store.create_task(owner, "flow", {"steps": {}}, [], ["a"], **limits)
    except TasksAtLimit as refused:
        return refused.why


def race(target, n: int) -> None:
    import threading

    threads = [threading.Thread(target=target) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_racing_enqueues_of_many_keys_never_pass_the_service_wide_limit(store_url):
    """Sixteen threads of four keys, each key allowed 3 unfinished tasks and the store 5 (``max_tasks``): exactly 5
    tasks are admitted however the inserts interleave; a refusal says which limit it met."""
    import threading

    TaskStore(store_url)
    start, got = threading.Barrier(16), []

    def enqueue(owner: str) -> None:
        start.wait()
        got.append((owner, created(TaskStore(store_url), owner, limit=3, total=5)))

    threads = [threading.Thread(target=enqueue, args=(f"key{n % 4}",)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    admitted = [(owner, why) for owner, why in got if why not in ("limit", "max_tasks")]
    assert len(got) == 16 and len(admitted) == 5, got
    assert TaskStore(store_url).status_counts() == {"queued": 5}
    assert "max_tasks" in [why for _, why in got]  # no key had 3: the store's limit refused the others
    assert all(why != "limit" or [o for o, _ in admitted].count(owner) == 3 for owner, why in got)


def test_racing_uploads_into_one_new_index_make_one_owner_and_one_ingestion(store_url):
    """Eight threads (four keys, two each), each with its own engine, upload into one new index at once: exactly
    one ingestion is queued, its key owns the index, the others learn why they were refused; after it ends the
    owner may upload again and delete the record, the others never."""
    import threading

    url = store_url
    TaskStore(url)
    start, got = threading.Barrier(8), []

    def upload(owner: str) -> None:
        store = TaskStore(url)
        start.wait()
        job = {"ingest": {"index": "shared"}, "documents": 1}
        got.append((owner, *store.create_ingest_task(owner, "shared", "ingest", job, ["staging", "ingest"],
                                                     limit=5)))

    threads = [threading.Thread(target=upload, args=(f"key{i % 4}",)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    admitted = [(owner, task_id) for owner, task_id, why in got if why == "ok"]
    assert len(got) == 8 and len(admitted) == 1
    owner, task_id = admitted[0]
    store = TaskStore(url)
    assert store.index("shared")["owner"] == owner and store.index("shared")["ingest_task"] == task_id
    assert all(why == ("owner" if o != owner else f"busy:{task_id}") for o, _, why in got if why != "ok")
    assert store.task(task_id, owner)["flow"] == "ingest:shared"
    assert store.forget_index("shared", owner) == f"busy:{task_id}"  # not while its ingestion runs
    store.finish(task_id, "finished")
    assert store.create_ingest_task("other", "shared", "ingest", {"documents": 1}, ["a"], limit=5) == (None, "owner")
    second, why = store.create_ingest_task(owner, "shared", "ingest", {"documents": 1}, ["a"], limit=5)
    assert why == "ok" and store.index("shared")["ingest_task"] == second
    store.finish(second, "failed", error="x")
    assert store.forget_index("shared", "other") == "owner" and store.forget_index("shared", owner) == "ok"
    assert store.index("shared") is None and store.indices_made() == {}


def test_the_rows_of_the_named_indices_only(store_url):
    store = TaskStore(store_url)
    for owner, name in (("alice", "news"), ("bob", "notes"), ("bob", "papers")):
        task_id, why = store.create_ingest_task(owner, name, "ingest", {"documents": 1}, ["a"], limit=5)
        assert why == "ok"
        store.finish(task_id, "finished")
    assert set(store.indices_made()) == {"news", "notes", "papers"}
    named = store.indices_made({"news", "papers", "absent"})
    assert set(named) == {"news", "papers"} and named["news"]["owner"] == "alice" and named["papers"]["owner"] == "bob"
    assert named["news"] == store.index("news")
    assert store.indices_made(set()) == {}


def test_a_read_does_not_wait_behind_a_writer(tmp_path):
    """SQLite: while another process holds the write lock, reading a task answers at once (from the snapshot
    before that write), where a write waits for the lock."""
    import sqlite3
    import threading

    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    store = TaskStore(url)
    task_id = new_task(store)
    writer = sqlite3.connect(tmp_path / "tasks.db", isolation_level=None)
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE tasks SET flow = 'changed'")
    read: list = []
    reader = threading.Thread(target=lambda: read.append(store.task(task_id, "alice")))
    reader.start()
    reader.join(20)  # a read that took the write lock would wait the 30 s busy timeout
    writer.execute("COMMIT")
    assert read and read[0]["flow"] == "flow"
    assert store.task(task_id, "alice")["flow"] == "changed"


def test_an_older_store_gets_the_columns_added_since(store_url):
    """A store made before ``indices.shared`` existed gets the column, its rows private, on PostgreSQL as on
    SQLite (the DDL compiled for the database's dialect)."""
    engine = sa.create_engine(store_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE indices (name VARCHAR(200) PRIMARY KEY, owner VARCHAR(64) NOT NULL, "
                             "spec VARCHAR(200) NOT NULL, created FLOAT NOT NULL, ingest_task VARCHAR(32))")
        conn.exec_driver_sql("INSERT INTO indices VALUES ('old', 'alice', 'ingest', 1.0, NULL)")
    engine.dispose()
    store = TaskStore(store_url)
    assert store.index("old")["shared"] is False
    assert store.share_index("old", "alice", True) and store.index("old")["shared"] is True
