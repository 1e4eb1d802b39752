"""Compaction in the service: an upload that leaves its index with more shards than ``compact_after_shards``
compacts it before its task finishes (its log says so), 0 never does; an admin key compacts any index the service
made (``index_admin.compact_any``, ``POST /v1/admin/indices/{name}/compact``), a 409 while an upload into it runs.
Real uploads accepted by ``Service`` (real SQLite task store), ingested by the task's own code (``run_ingest``) with
MiniLM in this process; the route over real HTTP (uvicorn on 127.0.0.1)."""

from __future__ import annotations

import pytest
import requests
from pydantic import ValidationError

from operators.api_keys import key_hash
from operators.store import Index
from serve import auth, index_admin
from serve.errors import ApiError
from serve.indices import live_doc_ids
from serve.ingest_task import run_ingest
from serve.service import Service
from serve.service_settings import COMPACT_AFTER_SHARDS, ServiceArgs, resolve
from tests.serve.conftest import api_on_localhost, upload

pytestmark = pytest.mark.slow  # MiniLM loads in this process

ADMIN, BOB = "admin-key-0123456789", "bob-key-0123456789"
WORDS = ["bees", "ants", "wasps", "moths", "beetles"]


def doc(i: int) -> list[dict]:
    return [{"id": WORDS[i], "text": f"{WORDS[i]} live in the garden"}]


def ingest(service: Service, name: str, docs: list[dict], tenant: str = "alice") -> dict:
    """One upload, run to its end; the finished task."""
    task_id, job = upload(service, name, tenant, docs)
    run_ingest(service.store, task_id, job)
    task = service.store.task(task_id, None)
    assert task["status"] == "finished", task
    return task


def shards(service: Service, name: str) -> int:
    return Index.open(service.indices.folder / name, verify=False).counts()["shards"]


def test_the_setting_reaches_the_service_config():
    assert resolve(ServiceArgs(), environ={})["compact_after_shards"] == COMPACT_AFTER_SHARDS
    assert resolve(ServiceArgs(compact_after_shards=0), environ={})["compact_after_shards"] == 0
    with pytest.raises(ValidationError, match="compact_after_shards"):
        ServiceArgs(compact_after_shards=-1)


def test_an_upload_over_the_threshold_compacts_the_index_in_its_task(upload_service):
    upload_service.indices.compact_after_shards = 2
    for i in range(2):
        task = ingest(upload_service, "notes", doc(i))
        assert "compaction" not in task["result"]["result_description"]
        assert not any("compact" in line for line in task["log"])
    assert shards(upload_service, "notes") == 2
    task = ingest(upload_service, "notes", doc(2))  # the third shard: over 2
    done = task["result"]["result_description"]["compaction"]
    assert (done["shards_before"], done["shards_after"], done["chunks"]) == (3, 1, 3)
    assert any("over compact_after_shards=2: compacting" in line for line in task["log"]), task["log"]
    assert any(line.startswith("compacted index 'notes': 3 shards into 1") for line in task["log"]), task["log"]
    assert shards(upload_service, "notes") == 1
    assert live_doc_ids(Index.open(upload_service.indices.folder / "notes")) == set(WORDS[:3])


def test_compact_after_shards_0_never_compacts(upload_service):
    upload_service.indices.compact_after_shards = 0
    for i in range(3):
        assert "compaction" not in ingest(upload_service, "notes", doc(i))["result"]["result_description"]
    assert shards(upload_service, "notes") == 3


@pytest.fixture
def admin_service(tmp_path, monkeypatch):
    """A Service with the keys ``root`` (admin) and ``bob``, and no compaction by uploads."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0,
                       compact_after_shards=0, api_keys=[{"id": "root", "sha256": key_hash(ADMIN), "admin": True},
                                                         {"id": "bob", "sha256": key_hash(BOB)}])
    config = resolve(args, environ={})
    service = Service(config, [], "tessera")
    service.indices.compact_after_shards = 0
    yield service, config


def test_an_admin_key_compacts_any_index_and_a_running_upload_is_a_409(admin_service):
    service, _ = admin_service
    for i in range(3):
        ingest(service, "notes", doc(i))
    service.indices.delete_documents("notes", ["ants"], "alice")  # a tombstone the compaction drops

    with pytest.raises(ApiError) as err:
        index_admin.compact_any(service.indices, "notes", "bob")
    assert (err.value.status, err.value.code) == (403, "admin_only")
    with pytest.raises(ApiError) as err:
        index_admin.compact_any(service.indices, "nothing", "root")
    assert (err.value.status, err.value.code) == (404, "index_not_found")

    task_id, job = upload(service, "notes", "alice", doc(3))  # queued: an ingestion into it is unfinished
    with pytest.raises(ApiError) as err:
        index_admin.compact_any(service.indices, "notes", "root")
    assert (err.value.status, err.value.code) == (409, "index_busy") and task_id in err.value.message
    run_ingest(service.store, task_id, job)

    done = index_admin.compact_any(service.indices, "notes", "root")
    assert {k: done[k] for k in ("index", "owner", "shards_before", "shards_after", "chunks",
                                 "tombstones_dropped")} == {"index": "notes", "owner": "alice", "shards_before": 4,
                                                            "shards_after": 1, "chunks": 3, "tombstones_dropped": 1}
    assert done["seconds"] >= 0
    index = Index.open(service.indices.folder / "notes")
    assert index.counts()["tombstones"] == 0 and live_doc_ids(index) == {"bees", "wasps", "moths"}


def test_the_compact_route_over_http(admin_service):
    service, config = admin_service
    for i in range(2):
        ingest(service, "notes", doc(i))
    auth.configure(config["keys"], None, None)
    try:
        with api_on_localhost() as base:
            def post(path: str, key: str) -> requests.Response:
                return requests.post(base + path, headers={"Authorization": f"Bearer {key}"}, timeout=60)

            refused = post("/v1/admin/indices/notes/compact", BOB)
            assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_only", refused.text
            missing = post("/v1/admin/indices/nothing/compact", ADMIN)
            assert missing.status_code == 404 and missing.json()["error"]["param"] == "name", missing.text
            done = post("/v1/admin/indices/notes/compact", ADMIN)
            assert done.status_code == 200, done.text
            assert (done.json()["shards_before"], done.json()["shards_after"]) == (2, 1)
    finally:
        auth.configure({}, None, None)
