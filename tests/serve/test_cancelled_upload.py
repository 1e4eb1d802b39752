"""A first upload whose worker died (interrupted) leaves nothing behind, like a failed one: no folder, no owner file,
no staged files, no record, so its name is free for any key; an interrupted upload into an index that holds documents
keeps the index whole. Real uploads accepted by ``Service`` (real SQLite task store), their task then failed as
interrupted by ``taskrunner.interrupted``, the code a replica runs at start (``recover``) and when a worker is gone.
The cancel path's clean-up (``discard_leftovers`` with the store, once the worker is dead) is checked the same way."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve import taskrunner
from serve.documents import DocumentsRequest
from serve.ingest_task import run_ingest
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve

DOCS = [{"id": "bees", "title": "Bees", "text": "honey bees make honey from nectar"}]


@pytest.fixture
def service(tmp_path, monkeypatch) -> Service:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0)
    return Service(resolve(args, environ={}), [], "tessera")


def upload(service: Service, name: str, tenant: str, docs: list[dict] = DOCS) -> tuple[str, dict]:
    queued = service.indices.add(name, DocumentsRequest.model_validate({"documents": docs}), tenant)
    return queued["task_id"], service.store.task(queued["task_id"], None)["spec"]["ingest"]


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


def test_an_interrupted_first_upload_leaves_no_folder_record_or_file_and_frees_the_name(service):
    task_id, job = upload(service, "notes", "alice")
    assert (Path(job["index_path"]) / "owner.json").is_file() and Path(job["source"]).is_file()
    assert taskrunner.interrupted(service.store, task_id, taskrunner.INTERRUPTED)
    task = service.store.task(task_id, None)
    assert task["status"] == "failed" and task["error"] == taskrunner.INTERRUPTED
    assert not taskrunner.interrupted(service.store, task_id, taskrunner.INTERRUPTED)  # once only
    assert_gone_and_free(service, task_id, job)


def test_a_cancelled_first_upload_whose_worker_is_dead_is_removed_too(service):
    task_id, job = upload(service, "notes", "alice")
    assert service.store.finish(task_id, "cancelled", log="cancelled by the client")  # as Service.cancel does
    taskrunner.discard_leftovers(service.store.task(task_id, None), service.store)
    assert_gone_and_free(service, task_id, job)


def test_a_cancelled_first_upload_without_the_store_keeps_the_index(service):
    """Without knowing the worker is dead (no store given), only the upload's file goes: it may still write there."""
    task_id, job = upload(service, "notes", "alice")
    assert service.store.finish(task_id, "cancelled")
    taskrunner.discard_leftovers(service.store.task(task_id, None))
    assert not Path(job["source"]).exists()
    assert (Path(job["index_path"]) / "owner.json").is_file() and service.store.index("notes")["owner"] == "alice"


@pytest.mark.slow  # MiniLM loads in this process
def test_an_interrupted_upload_into_an_index_with_documents_keeps_it(service):
    task_id, job = upload(service, "notes", "alice")
    run_ingest(service.store, task_id, job)
    assert service.store.task(task_id, None)["status"] == "finished"
    task_id, job = upload(service, "notes", "alice", [{"id": "ants", "text": "ants farm aphids"}])
    assert taskrunner.interrupted(service.store, task_id, taskrunner.INTERRUPTED)
    assert service.store.task(task_id, None)["status"] == "failed" and not Path(job["source"]).exists()
    assert (Path(job["index_path"]) / "manifest.json").is_file()
    assert service.store.index("notes")["owner"] == "alice"
    page = service.indices.documents("notes", "alice", 0, 10)
    assert [d["id"] for d in page["documents"]] == ["bees"]
