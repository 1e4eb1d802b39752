"""Compaction in the service: an upload that leaves its index with more shards than ``compact_after_shards``
compacts it before its task finishes (its log says so, and its progress has a third step, ``compact``), 0 never
does; an admin key compacts any index the service made (``index_admin.compact_any``,
``POST /v1/admin/indices/{name}/compact``) in a task of its own, answered 202 at once: a 409 while an upload into it
runs or another compaction of it is unfinished. Real uploads accepted by ``Service`` (real SQLite task store),
ingested by the task's own code (``run_ingest``) with MiniLM in this process; the route over real HTTP (uvicorn on
127.0.0.1), its task on a real Ray actor."""

from __future__ import annotations

import time

import pytest
import requests
from pydantic import ValidationError

from operators.api_keys import key_hash
from operators.store import Index
from serve.indices import index_admin
from serve.tasks import ingest_task, task_rows, taskrunner
from serve.http.errors import ApiError
from serve.indices.index_reading import live_doc_ids
from serve.tasks.ingest_task import run_ingest
from serve.service import Service
from serve.tasks.results import progress_body
from serve.service_settings import COMPACT_AFTER_SHARDS, ServiceArgs, resolve
from tests.serve.conftest import WatchedStore, api_on_localhost, upload

pytestmark = pytest.mark.integration  # MiniLM loads in this process

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


def test_an_uploads_compaction_is_a_third_step_of_its_task(upload_service, monkeypatch):
    """While it merges, the task's progress shows ``compact`` running with the chunks merged so far (2 of 3 steps
    done), then done with the chunks merged in (deleted ones included) and the live ones out, as an admin's
    compaction counts them; the upload's own steps and documents stay as they were."""
    monkeypatch.setattr(task_rows, "PROGRESS_EVERY_S", 0.0)  # every shard's write, not one each half second
    upload_service.indices.compact_after_shards = 2
    for i in range(2):
        task = ingest(upload_service, "notes", doc(i))
        assert progress_body(task)["progress"]["pipeline_progress"] == "2/2"
        assert list(task["step_progress"]) == task["steps"] == ["staging", "ingest"]
    upload_service.indices.delete_documents("notes", ["ants"], "alice")  # a tombstone: 3 chunks in, 2 out
    watched = WatchedStore(upload_service.store.url)
    task_id, job = upload(upload_service, "notes", "alice", doc(2))
    ingest_task.run_ingest(watched, task_id, job)

    for answer in watched.answers:  # never more steps done than steps shown
        done, total = map(int, answer["pipeline_progress"].split("/"))
        assert done <= total == len(answer["step_progress"]), answer
    merging = [(a["pipeline_progress"], a["step_output"]["status"], a["step_output"]["rows_in"],
                a["step_output"]["rows_out"]) for a in watched.answers if a["current_step"] == "compact"]
    # started, then each shard merged (bees, ants deleted, wasps), then done
    assert merging == [("2/3", "running", 0, 0), ("2/3", "running", 3, 1), ("2/3", "running", 3, 1),
                       ("2/3", "running", 3, 2), ("3/3", "done", 3, 2)], merging
    task = upload_service.store.task(task_id, None)
    assert task["status"] == "finished", task
    progress = progress_body(task)["progress"]
    done = task["result"]["result_description"]["compaction"]
    assert progress["pipeline_progress"] == "3/3" and progress["current_step"] == "compact"
    assert progress["step_progress"]["compact"] == {"status": "done", "rows_in": 3, "rows_out": 2,
                                                    "seconds": done["seconds"]}
    assert {step: (info["status"], info["rows_out"]) for step, info in progress["step_progress"].items()
            if step != "compact"} == {"staging": ("done", 1), "ingest": ("done", 1)}
    assert task["rows_done"] == 1  # the upload's documents, not the chunks merged
    assert any("over compact_after_shards=2: compacting" in line for line in task["log"]), task["log"]
    assert any(line.startswith("compacted index 'notes': 3 shards into 1") for line in task["log"]), task["log"]
    assert "merged 3 of 3 shards" in task["log"]


def test_a_failed_compaction_leaves_the_upload_with_its_two_steps(upload_service):
    """A damaged shard stops the merge: the upload stands, uncompacted, its task finished with its two steps (a
    finished task marks every step done, so a ``compact`` step kept would say it compacted)."""
    upload_service.indices.compact_after_shards = 1
    ingest(upload_service, "notes", doc(0))  # one shard: not over 1
    first = next((upload_service.indices.folder / "notes" / "shards").iterdir())
    damaged = next(f for f in sorted(first.iterdir()) if f.is_file())
    damaged.write_bytes(damaged.read_bytes() + b"damage")  # its checksum no longer matches the manifest's
    task = ingest(upload_service, "notes", doc(1))
    assert any(line.startswith("compaction failed, the index keeps its 2 shards") for line in task["log"]), task
    assert "compaction" not in task["result"]["result_description"]
    progress = progress_body(task)["progress"]
    assert task["steps"] == list(progress["step_progress"]) == ["staging", "ingest"]
    assert (progress["pipeline_progress"], progress["current_step"]) == ("2/2", "ingest")
    assert shards(upload_service, "notes") == 2


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


def refused(call, status: int, code: str) -> ApiError:
    with pytest.raises(ApiError) as err:
        call()
    assert (err.value.status, err.value.code) == (status, code), err.value.message
    return err.value


def test_an_admin_key_compacts_any_index_in_a_task_one_at_a_time(admin_service):
    """``compact_any`` queues the task and returns at once; the task, run by the worker's own code (``run_task``),
    compacts and finishes with what it did. While it is unfinished, a second compaction and deleting the index are
    409s; a running upload is a 409 for a compaction."""
    service, _ = admin_service
    for i in range(3):
        ingest(service, "notes", doc(i))
    service.indices.delete_documents("notes", ["ants"], "alice")  # a tombstone the compaction drops

    refused(lambda: index_admin.compact_any(service.indices, "notes", "bob"), 403, "admin_only")
    refused(lambda: index_admin.compact_any(service.indices, "nothing", "root"), 404, "index_not_found")
    upload(service, "empty", "alice")  # made, its first upload not run: no documents to compact
    refused(lambda: index_admin.compact_any(service.indices, "empty", "root"), 404, "index_not_found")

    task_id, job = upload(service, "notes", "alice", doc(3))  # queued: an ingestion into it is unfinished
    assert task_id in refused(lambda: index_admin.compact_any(service.indices, "notes", "root"), 409,
                              "index_busy").message
    run_ingest(service.store, task_id, job)

    queued = index_admin.compact_any(service.indices, "notes", "root")
    compaction = queued["task_id"]
    assert queued == {"task_id": compaction, "index": "notes", "owner": "alice", "status": "queued",
                      "progress": f"/task/progress/{compaction}"}
    assert shards(service, "notes") == 4  # queued, not run: the request did not merge anything
    task = service.store.task(compaction, "root")  # the admin key's task: it follows it
    assert (task["status"], task["flow"], task["steps"]) == ("queued", "compact:notes", ["compact"])
    again = refused(lambda: index_admin.compact_any(service.indices, "notes", "root"), 409, "index_busy")
    assert f"being compacted already (task {compaction})" in again.message
    assert compaction in refused(lambda: service.indices.delete("notes", "alice"), 409, "index_busy").message

    taskrunner.run_task(service.store, compaction, 10)  # what the task's worker runs
    task = service.store.task(compaction, "root")
    assert task["status"] == "finished", task
    done = task["result"]["aggregated_data"]
    assert {k: done[k] for k in ("index", "owner", "shards_before", "shards_after", "chunks", "chunks_before",
                                 "tombstones_dropped")} == {"index": "notes", "owner": "alice", "shards_before": 4,
                                                            "shards_after": 1, "chunks": 3, "chunks_before": 4,
                                                            "tombstones_dropped": 1}
    assert done["seconds"] >= 0 and task["result"]["result_description"]["shards_after"] == 1
    assert task["step_progress"]["compact"] == {"status": "done", "rows_in": 4, "rows_out": 3,
                                                "seconds": done["seconds"]}
    assert task["log"][-1].startswith("compacted index 'notes': 4 shards into 1 in ")
    assert shards(service, "notes") == 1
    index = Index.open(service.indices.folder / "notes")
    assert index.counts()["tombstones"] == 0 and live_doc_ids(index) == {"bees", "wasps", "moths"}

    assert index_admin.compact_any(service.indices, "notes", "root")["task_id"] != compaction  # ended: a new one


@pytest.fixture
def admin_api(admin_service):
    """The API over ``admin_service`` on 127.0.0.1 with its keys; ``notes`` holds two uploads (two shards)."""
    service, config = admin_service
    for i in range(2):
        ingest(service, "notes", doc(i))
    with api_on_localhost(config["keys"]) as base:
        yield base, service


def post(url: str, key: str) -> requests.Response:
    return requests.post(url, headers={"Authorization": f"Bearer {key}"}, timeout=60)


def test_the_compact_route_refuses_over_http(admin_api):
    """The refusals come before any task is made, so no Ray here."""
    base, service = admin_api
    refused = post(base + "/v1/admin/indices/notes/compact", BOB)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_only", refused.text
    missing = post(base + "/v1/admin/indices/nothing/compact", ADMIN)
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "name", missing.text
    task_id, _ = upload(service, "notes", "alice", doc(2))
    busy = post(base + "/v1/admin/indices/notes/compact", ADMIN)
    assert busy.status_code == 409 and busy.json()["error"]["code"] == "index_busy", busy.text
    assert task_id in busy.json()["error"]["message"]
    assert shards(service, "notes") == 2


@pytest.mark.ray  # the task runs on a Ray actor, as in the service
def test_the_compact_route_answers_202_and_its_task_compacts_on_ray(ray_session, admin_api):
    base, service = admin_api
    started = time.monotonic()
    queued = post(base + "/v1/admin/indices/notes/compact", ADMIN)
    assert queued.status_code == 202, queued.text
    task_id = queued.json()["task_id"]
    assert queued.headers["location"] == queued.json()["progress"] == f"/task/progress/{task_id}"
    # the worker is a new process (seconds to start): the first task is still unfinished now
    second = post(base + "/v1/admin/indices/notes/compact", ADMIN)
    assert second.status_code == 409 and second.json()["error"]["code"] == "index_busy", second.text
    assert task_id in second.json()["error"]["message"]

    while True:
        body = requests.get(base + queued.json()["progress"], headers={"Authorization": f"Bearer {ADMIN}"},
                            timeout=30).json()
        if body["has_finished"]:
            break
        assert time.monotonic() - started < 240, body
        time.sleep(0.1)
    assert body["status"] == "finished", body
    done = body["result"]["aggregated_data"]
    assert (done["index"], done["owner"], done["shards_before"], done["shards_after"], done["chunks"]) == (
        "notes", "alice", 2, 1, 2)
    assert done["seconds"] >= 0
    assert shards(service, "notes") == 1


@pytest.mark.ray
@pytest.mark.process  # nginx
def test_behind_a_proxy_under_a_prefix_the_compact_routes_location_keeps_the_prefix(ray_session, admin_service,
                                                                                     tmp_path):
    """Served under ``/tessera/`` by nginx (``root_path``, docs/serving.md "Behind a reverse proxy"), the 202's
    ``Location`` and ``progress`` were ``/task/progress/{id}``, which the client followed out of the prefix (nginx's
    404); they are ``/tessera/task/progress/{id}``, which the client follows to the finished task."""
    from urllib.parse import urljoin

    from tests.serve.nginx_proxy import nginx_in_front

    service, config = admin_service
    for i in range(2):
        ingest(service, "notes", doc(i))
    with api_on_localhost(config["keys"], root_path="/tessera") as base, nginx_in_front(base, tmp_path) as proxied:
        queued = post(proxied + "/v1/admin/indices/notes/compact", ADMIN)
        assert queued.status_code == 202, queued.text
        task_id = queued.json()["task_id"]
        assert queued.headers["location"] == queued.json()["progress"] == f"/tessera/task/progress/{task_id}"
        follow = urljoin(proxied + "/", queued.headers["location"])
        while not (body := requests.get(follow, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30).json())[
                "has_finished"]:
            time.sleep(0.1)
    assert body["status"] == "finished" and shards(service, "notes") == 1, body
