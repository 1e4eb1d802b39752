"""What the service writes under ``$TESSERA_HOME`` is its user's only (files 0600, folders 0700) even when the
process had the usual umask 022 (``serve.security.private_files``): the task store and its WAL, a key's saved flow over
real HTTP, an upload and the index its ingestion writes (the task's own code, in this process), and a compaction run by
a real task worker on Ray. Each test starts with umask 022 and puts the process's umask back after."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pyarrow as pa
import pytest
import requests

from serve.service import Service
from serve.service_settings import ServiceArgs, key_hash, resolve
from serve.tasks.taskstore import TaskStore
from tests.serve.conftest import api_on_localhost, upload

ALICE = "alice-private-files-key-0123456789"
BM25_FLOW = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}}}


@pytest.fixture
def usual_umask():
    """umask 022 (files 0644, folders 0755) for the test; the process's own umask again after it."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def not_private(root: Path) -> dict[str, str]:
    """Every file or folder under ``root`` (itself included) open to the group or others, with its mode."""
    paths = [root, *root.rglob("*")]
    return {str(p.relative_to(root)): f"{mode(p):o}" for p in paths if mode(p) & 0o077}


def test_the_task_store_and_its_wal_are_private_whatever_the_umask(usual_umask, tmp_path):
    db = tmp_path / "home" / "tasks.db"  # its folder too is made by the store
    store = TaskStore(f"sqlite:///{db}")
    task_id = store.create_task("alice", "bm25", BM25_FLOW, [{"qid": "1", "query": "secret query"}], ["bm25"])
    assert store.finish(task_id, "finished", result={"data": [{"text": "secret result"}]})
    files = [db, db.with_name("tasks.db-wal"), db.with_name("tasks.db-shm")]
    try:
        assert all(f.exists() for f in files), sorted(p.name for p in db.parent.iterdir())  # WAL while it is open
        assert {f.name: f"{mode(f):o}" for f in files} == {f.name: "600" for f in files}
        assert mode(db.parent) == 0o700
    finally:
        store.engine.dispose()


def test_a_task_store_file_the_start_check_made_open_is_made_private_when_the_service_opens_it(usual_umask,
                                                                                                  tmp_path):
    from flows.task_store_check import task_store_problem

    db = tmp_path / "tasks.db"
    assert task_store_problem(f"sqlite:///{db}") is None  # what `tessera serve` does before Serve starts
    assert mode(db) == 0o644  # made with the CLI's umask
    store = TaskStore(f"sqlite:///{db}")
    store.create_task("alice", "bm25", BM25_FLOW, [{"qid": "1", "query": "q"}], ["bm25"])
    try:
        assert {p.name: f"{mode(p):o}" for p in tmp_path.glob("tasks.db*")} == {
            "tasks.db": "600", "tasks.db-wal": "600", "tasks.db-shm": "600"}
    finally:
        store.engine.dispose()


def test_a_keys_saved_flow_is_private(usual_umask, tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0,
                       api_keys=[{"id": "alice", "sha256": key_hash(ALICE)}])
    config = resolve(args, environ={})
    Service(config, [], "tessera")
    with api_on_localhost(config["keys"]) as base:
        saved = requests.put(f"{base}/flows/mine", json=BM25_FLOW, headers={"Authorization": f"Bearer {ALICE}"},
                             timeout=60)
    assert saved.status_code == 201, saved.text
    flow = home / "flows" / "keys" / "alice" / "mine.yaml"
    assert flow.is_file() and "retrieve.bm25" in flow.read_text()
    assert not_private(home / "flows") == {}
    assert mode(flow) == 0o600


@pytest.mark.integration  # MiniLM embeds the upload in this process
def test_an_upload_and_the_index_its_ingestion_writes_are_private(usual_umask, upload_service):
    from serve.indices.index_owner import OWNER_FILE
    from serve.tasks.ingest_task import run_ingest

    task_id, job = upload(upload_service, "notes", "alice")
    source, index, home = Path(job["source"]), Path(job["index_path"]), Path(upload_service.home)
    assert source.is_file() and (index / OWNER_FILE).is_file()
    assert not_private(home / "uploads") == {} and not_private(index) == {}
    assert mode(source) == 0o600 and mode(index / OWNER_FILE) == 0o600 and mode(index) == 0o700

    run_ingest(upload_service.store, task_id, job)
    assert upload_service.store.task(task_id, None)["status"] == "finished"
    written = [p for p in index.rglob("*") if p.is_file()]
    assert (index / "manifest.json") in written and len(written) > 3  # the ingestion's shards and manifest
    assert not_private(index) == {}


class Replica:
    """Stands for the Serve replica a task worker goes back to."""


@pytest.mark.ray
@pytest.mark.slow
def test_a_task_worker_writes_the_index_private_though_ray_runs_with_the_usual_umask(ray_session, usual_umask,
                                                                                     tmp_path):
    """An index's compaction on a real ``TaskWorker``: the shards and manifest it writes are private, while a plain
    Ray worker of this session (and this test's own index files) have the umask 022."""
    from operators.store import Index, IndexSettings
    from serve.tasks import taskrunner
    from serve.tasks.ingest_task import COMPACT_STEPS

    @ray_session.remote(num_cpus=0)
    def ray_umask() -> int:
        umask = os.umask(0)
        os.umask(umask)
        return umask

    if ray_session.get(ray_umask.remote(), timeout=120) & 0o077 == 0o077:
        pytest.skip("this session's Ray was started with a private umask: a worker's own could not be told apart")
    path = tmp_path / "home" / "indices" / "notes"
    index = Index.create(path, IndexSettings(dense=False))
    for doc in ("bees", "ants"):  # two shards, so the compaction writes one new shard and a new manifest
        index.add(pa.table({"docno": [f"{doc}#0"], "doc_id": [doc], "title": [doc], "text": [f"{doc} honey"]}))
    before = {p for p in path.rglob("*")}
    assert mode(path / "manifest.json") == 0o644

    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    store = TaskStore(url)
    job = {"compact": {"index": "notes", "index_path": str(path), "owner": "alice"}}
    task_id, why = store.create_compact_task("alice", "notes", job, COMPACT_STEPS, limit=5)
    assert why == "ok"
    replica = ray_session.remote(num_cpus=0)(Replica).remote()
    ref = taskrunner.launch(task_id, url, env={"TESSERA_HOME": str(tmp_path / "home")}, num_cpus=0,
                            max_result_rows=10, replica=replica)
    try:
        assert ray_session.get(ref, timeout=300) is not None  # the worker is back: its task ended normally
    finally:
        ray_session.kill(replica)  # its worker, waiting for the next task, exits once it is gone
    task = store.task(task_id, None)
    assert task["status"] == "finished" and task["result"]["aggregated_data"]["shards_after"] == 1, task
    new = {p for p in path.rglob("*")} - before
    assert new and {str(p.relative_to(path)): f"{mode(p):o}" for p in new if mode(p) & 0o077} == {}
    assert mode(path / "manifest.json") == 0o600
