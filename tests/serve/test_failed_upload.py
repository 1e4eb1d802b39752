"""A failed upload into a new index leaves nothing behind: no folder, no owner file, no staged files, no record, so
its name is free for any key; a failed upload into an index that holds documents keeps the index whole. Real uploads
accepted by ``Service`` (real SQLite task store, MiniLM ingestion in this process), run by the task's own code
(``run_ingest``, what the task's Ray actor runs) after the uploaded file was lost, which fails the ingestion."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve.documents import DocumentsRequest
from serve.ingest_task import run_ingest
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve

pytestmark = pytest.mark.slow  # MiniLM loads in this process

DOCS = [{"id": "bees", "title": "Bees", "text": "honey bees make honey from nectar"}]


@pytest.fixture
def service(tmp_path, monkeypatch) -> Service:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0)
    return Service(resolve(args, environ={}), [], "tessera")


def upload(service: Service, name: str, tenant: str, docs: list[dict] = DOCS) -> tuple[str, dict]:
    queued = service.indices.add(name, DocumentsRequest.model_validate({"documents": docs}), tenant)
    return queued["task_id"], service.store.task(queued["task_id"], None)["spec"]["ingest"]


def fail(service: Service, task_id: str, job: dict) -> None:
    """Run the upload's ingestion with its file gone: it fails."""
    Path(job["source"]).unlink()
    run_ingest(service.store, task_id, job)
    task = service.store.task(task_id, None)
    assert task["status"] == "failed" and task["error"], task


def test_a_failed_first_upload_leaves_no_folder_record_or_file_and_frees_the_name(service):
    task_id, job = upload(service, "notes", "alice")
    folder, uploads = Path(job["index_path"]), Path(job["source"]).parent
    assert (folder / "owner.json").is_file() and uploads.is_dir()  # what the accepted upload made
    fail(service, task_id, job)
    assert not folder.exists() and not uploads.exists()
    assert service.store.index("notes") is None
    assert not any(e["name"] == "notes" for e in service.indices.listing("alice"))
    task_id, job = upload(service, "notes", "bob")  # the name is free for another key
    assert service.store.index("notes")["owner"] == "bob"
    assert (folder / "owner.json").is_file()


def test_a_failed_upload_into_an_index_with_documents_keeps_it(service):
    task_id, job = upload(service, "notes", "alice")
    run_ingest(service.store, task_id, job)
    assert service.store.task(task_id, None)["status"] == "finished"
    task_id, job = upload(service, "notes", "alice", [{"id": "ants", "text": "ants farm aphids"}])
    fail(service, task_id, job)
    assert service.store.index("notes")["owner"] == "alice"
    page = service.indices.documents("notes", "alice", 0, 10)
    assert [d["id"] for d in page["documents"]] == ["bees"]
