"""A first upload that is cancelled or whose worker died (interrupted) leaves nothing behind once its worker has
stopped, like a failed one: no folder, no owner file, no staged files, no record, so its name is free for any key; one
into an index that holds documents keeps the index whole. Real uploads accepted by ``Service`` (real SQLite task
store): their clean-up through ``taskrunner``'s own code, and, over real HTTP with the task on a real Ray actor,
``GET /task/cancel`` while the actor is ingesting."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from serve.tasks import taskrunner
from serve.tasks.ingest_task import run_ingest
from serve.service import Service
from tests.serve.conftest import UPLOAD_DOCS, api_on_localhost, upload


def assert_gone_and_free(service: Service, task_id: str, job: dict) -> None:
    folder, uploads = Path(job["index_path"]), Path(job["source"]).parent
    assert not folder.exists() and not uploads.exists()
    assert not any(p.name.startswith(".deleted-") for p in folder.parent.iterdir())
    assert service.store.index("notes") is None
    assert not any(e["name"] == "notes" for e in service.indices.listing("alice"))
    assert service.store.task(task_id, None)["status"] in ("failed", "cancelled")  # the task itself stays
    upload(service, "notes", "bob")  # the name is free for another key
    assert service.store.index("notes")["owner"] == "bob"
    assert (folder / "owner.json").is_file()


def test_an_interrupted_first_upload_leaves_no_folder_record_or_file_and_frees_the_name(upload_service):
    task_id, job = upload(upload_service, "notes", "alice")
    assert (Path(job["index_path"]) / "owner.json").is_file() and Path(job["source"]).is_file()
    assert taskrunner.interrupted(upload_service.store, task_id, taskrunner.INTERRUPTED)
    task = upload_service.store.task(task_id, None)
    assert task["status"] == "failed"  # and it says where its documents are: the index it was making is gone
    assert task["error"] == (f"{taskrunner.INTERRUPTED}; none of its documents were added (the index it was "
                             "making is gone)")
    assert not taskrunner.interrupted(upload_service.store, task_id, taskrunner.INTERRUPTED)  # once only
    assert_gone_and_free(upload_service, task_id, job)


def test_a_cancelled_first_upload_whose_worker_is_dead_is_removed_too(upload_service):
    task_id, job = upload(upload_service, "notes", "alice")
    assert upload_service.store.finish(task_id, "cancelled", log="cancelled by the client")  # as Service.cancel does
    taskrunner.discard_leftovers(upload_service.store.task(task_id, None), upload_service.store)
    assert_gone_and_free(upload_service, task_id, job)


def test_a_cancelled_first_upload_goes_when_its_watcher_sees_the_worker_end(upload_service):
    """``Service._watch`` calls ``interrupted`` once the task's actor has ended: a cancelled task stays cancelled, and
    its first upload's index goes then (``stop`` may have given up waiting for the actor)."""
    task_id, job = upload(upload_service, "notes", "alice")
    assert upload_service.store.finish(task_id, "cancelled")
    taskrunner.discard_leftovers(upload_service.store.task(task_id, None))  # stop() said: may still be writing
    assert (Path(job["index_path"]) / "owner.json").is_file() and upload_service.store.index("notes") is not None
    assert not taskrunner.interrupted(upload_service.store, task_id, taskrunner.INTERRUPTED)
    assert upload_service.store.task(task_id, None)["status"] == "cancelled"
    assert_gone_and_free(upload_service, task_id, job)


def test_a_cancelled_first_upload_without_the_store_keeps_the_index(upload_service):
    """Without knowing the worker is dead (no store given), only the upload's file goes: it may still write there."""
    task_id, job = upload(upload_service, "notes", "alice")
    assert upload_service.store.finish(task_id, "cancelled")
    taskrunner.discard_leftovers(upload_service.store.task(task_id, None))
    assert not Path(job["source"]).exists()
    assert (Path(job["index_path"]) / "owner.json").is_file()
    assert upload_service.store.index("notes")["owner"] == "alice"


def test_an_upload_sent_after_the_cancel_keeps_the_index_the_cancelled_one_made(upload_service):
    """The cancelled task is final at once, so its owner may upload again before its clean-up runs: that upload is
    the index's latest, and the clean-up leaves the index, its record and the new upload's file alone."""
    task_id, job = upload(upload_service, "notes", "alice")
    assert upload_service.store.finish(task_id, "cancelled")
    again, job_again = upload(upload_service, "notes", "alice", [{"id": "ants", "text": "ants farm aphids"}])
    taskrunner.discard_leftovers(upload_service.store.task(task_id, None), upload_service.store)
    assert upload_service.store.index("notes")["ingest_task"] == again
    assert (Path(job["index_path"]) / "owner.json").is_file() and Path(job_again["source"]).is_file()


@pytest.mark.ray  # whether the task's actor lives is asked of Ray
def test_a_replica_starting_removes_a_cancelled_first_uploads_index(ray_session, upload_service):
    """The replica that watched a cancelled upload may die before the upload's worker does: the next replica to
    start (``recover``) removes the empty index, no worker of the task living."""
    task_id, job = upload(upload_service, "notes", "alice")
    assert upload_service.store.finish(task_id, "cancelled")
    assert (Path(job["index_path"]) / "owner.json").is_file() and upload_service.store.index("notes") is not None
    assert taskrunner.recover(upload_service.store) == 0  # no task was unfinished
    assert_gone_and_free(upload_service, task_id, job)


@pytest.mark.integration  # MiniLM loads in this process
def test_an_interrupted_upload_into_an_index_with_documents_keeps_it(upload_service):
    task_id, job = upload(upload_service, "notes", "alice")
    run_ingest(upload_service.store, task_id, job)
    assert upload_service.store.task(task_id, None)["status"] == "finished"
    task_id, job = upload(upload_service, "notes", "alice", [{"id": "ants", "text": "ants farm aphids"}])
    assert taskrunner.interrupted(upload_service.store, task_id, taskrunner.INTERRUPTED)
    assert upload_service.store.task(task_id, None)["status"] == "failed" and not Path(job["source"]).exists()
    error = upload_service.store.task(task_id, None)["error"]  # what became of its documents, and what to do
    assert error.startswith(taskrunner.INTERRUPTED) and "stay in index 'notes'" in error and "replace: true" in error
    assert (Path(job["index_path"]) / "manifest.json").is_file()
    assert upload_service.store.index("notes")["owner"] == "alice"
    page = upload_service.indices.documents("notes", "alice", 0, 10)
    assert [d["id"] for d in page["documents"]] == ["bees"]


# -- over HTTP, the task on a Ray actor -------------------------------------------------------------------------


@pytest.fixture
def base(ray_session, upload_service):
    """The API on a free port of 127.0.0.1 with ``upload_service``; its tasks run on actors of the session's Ray."""
    with api_on_localhost() as base:
        yield base


def progress(base: str, task_id: str, until: str, timeout_s: float = 180) -> dict:
    """The task's progress once its status is ``until`` or it has ended."""
    deadline = time.monotonic() + timeout_s
    while True:
        body = requests.get(f"{base}/task/progress/{task_id}", timeout=30).json()
        if body["status"] == until or body["has_finished"]:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.05)


#: An upload whose ingestion lasts seconds on any machine, so that a cancel finds it running (one document ended
#: before a fast machine's poll saw it run, or before the cancel came).
ANT_DOCS = [{"id": f"ants-{i}", "title": "Ants", "text": f"ants of colony {i} farm aphids for honeydew"}
            for i in range(1000)]


def cancel_while_ingesting(base: str, docs: list[dict]) -> str:
    """Upload ``docs`` into ``notes`` and cancel the task once its actor runs it (loading the encoder, ingesting)."""
    added = requests.post(f"{base}/v1/indices/notes/documents", json={"documents": docs}, timeout=60)
    assert added.status_code == 202, added.text
    task_id = added.json()["task_id"]
    assert progress(base, task_id, "running")["status"] == "running"
    cancelled = requests.get(f"{base}/task/cancel/{task_id}", timeout=60)
    assert cancelled.status_code == 200 and cancelled.text == "Success", cancelled.text
    return task_id


def settled(service: Service, task_id: str, timeout_s: float = 60) -> None:
    """Wait until the task's actor is gone and, when ``stop`` gave up on it first, the watcher saw it end."""
    deadline = time.monotonic() + timeout_s
    while taskrunner.alive(task_id) or service.watched_tasks():
        assert time.monotonic() < deadline, "the cancelled task's actor is still there"
        time.sleep(0.1)


@pytest.mark.ray
@pytest.mark.slow
def test_a_first_upload_cancelled_over_http_leaves_no_index(base, upload_service):
    task_id = cancel_while_ingesting(base, ANT_DOCS)
    settled(upload_service, task_id)
    assert progress(base, task_id, "cancelled")["status"] == "cancelled"
    listed = requests.get(f"{base}/v1/indices", timeout=60).json()["indices"]
    assert "notes" not in [e["name"] for e in listed]
    assert list((Path(upload_service.home) / "indices").iterdir()) == []
    assert_gone_and_free(upload_service, task_id, upload_service.store.task(task_id, None)["spec"]["ingest"])


@pytest.mark.ray
@pytest.mark.slow
def test_an_upload_cancelled_over_http_into_an_index_with_documents_keeps_them(base, upload_service):
    first = requests.post(f"{base}/v1/indices/notes/documents", json={"documents": UPLOAD_DOCS}, timeout=60)
    assert progress(base, first.json()["task_id"], "finished")["status"] == "finished"
    task_id = cancel_while_ingesting(base, ANT_DOCS)
    settled(upload_service, task_id)
    assert upload_service.store.index("notes")["owner"] == "local"
    page = requests.get(f"{base}/v1/indices/notes/documents", timeout=60).json()
    assert [d["id"] for d in page["documents"]] == ["bees"]
    found = requests.post(f"{base}/v1/search", json={"flow": "bm25", "query": "honey nectar", "index": "notes"},
                          timeout=120)
    assert found.status_code == 200, found.text
    assert [hit["docno"] for hit in found.json()["results"][0]["hits"]] == ["bees#0"]
    uploads = Path(upload_service.home) / "uploads" / "notes"
    assert not uploads.exists() or list(uploads.iterdir()) == []
    assert not (Path(upload_service.home) / "indices" / "notes" / "_ingest").exists()  # the killed run's lock too
    assert taskrunner.recover(upload_service.store) == 0  # a replica's start leaves the index too
    assert upload_service.store.index("notes")["owner"] == "local"
    assert (Path(upload_service.home) / "indices" / "notes" / "manifest.json").is_file()


@pytest.mark.ray
@pytest.mark.slow
def test_a_first_upload_cancelled_over_http_after_its_empty_manifest_is_written_leaves_no_index(base, upload_service):
    """The ingestion creates the index (an empty manifest) once the source is staged, and commits only when a shard is
    embedded: cancelled in between, the index goes all the same, and until then a search of it is a 409."""
    from serve.indices.index_owner import born

    docs = [{"id": f"d{i}", "text": f"document {i} about honey bees, nectar and the hive's winter stores"}
            for i in range(300)]
    added = requests.post(f"{base}/v1/indices/notes/documents", json={"documents": docs}, timeout=60)
    assert added.status_code == 202, added.text
    task_id, folder = added.json()["task_id"], Path(upload_service.home) / "indices" / "notes"
    deadline = time.monotonic() + 180
    while not (folder / "manifest.json").is_file():
        assert time.monotonic() < deadline, "the ingestion did not create the index"
        time.sleep(0.02)
    searched = requests.post(f"{base}/v1/search", json={"flow": "bm25", "query": "honey", "index": "notes"},
                             timeout=120)
    assert searched.status_code == 409 and searched.json()["error"]["code"] == "index_empty", searched.text
    assert not born(folder), "the upload committed before the test could cancel it"
    cancelled = requests.get(f"{base}/task/cancel/{task_id}", timeout=60)
    assert cancelled.status_code == 200 and cancelled.text == "Success", cancelled.text
    settled(upload_service, task_id)
    assert "notes" not in [e["name"] for e in requests.get(f"{base}/v1/indices", timeout=60).json()["indices"]]
    assert list((Path(upload_service.home) / "indices").iterdir()) == []
    assert_gone_and_free(upload_service, task_id, upload_service.store.task(task_id, None)["spec"]["ingest"])
