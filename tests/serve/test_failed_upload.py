"""A failed upload into a new index leaves nothing behind: no folder, no owner file, no staged files, no record, so
its name is free for any key; a failed upload into an index that holds documents keeps the index whole. Real uploads
accepted by ``Service`` (real SQLite task store, MiniLM ingestion in this process), run by the task's own code
(``run_ingest``, what the task's Ray actor runs) after the uploaded file was lost, which fails the ingestion."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve.tasks.ingest_task import run_ingest
from serve.service import Service
from tests.serve.conftest import upload

pytestmark = pytest.mark.integration  # MiniLM loads in this process


def fail(service: Service, task_id: str, job: dict) -> None:
    """Run the upload's ingestion with its file gone: it fails."""
    Path(job["source"]).unlink()
    run_ingest(service.store, task_id, job)
    task = service.store.task(task_id, None)
    assert task["status"] == "failed" and task["error"], task


def test_a_failed_first_upload_leaves_no_folder_record_or_file_and_frees_the_name(upload_service):
    task_id, job = upload(upload_service, "notes", "alice")
    folder, uploads = Path(job["index_path"]), Path(job["source"]).parent
    assert (folder / "owner.json").is_file() and uploads.is_dir()  # what the accepted upload made
    fail(upload_service, task_id, job)
    assert not folder.exists() and not uploads.exists()
    assert upload_service.store.index("notes") is None
    assert not any(e["name"] == "notes" for e in upload_service.indices.listing("alice"))
    task_id, job = upload(upload_service, "notes", "bob")  # the name is free for another key
    assert upload_service.store.index("notes")["owner"] == "bob"
    assert (folder / "owner.json").is_file()


def test_a_failed_upload_into_an_index_with_documents_keeps_it(upload_service):
    task_id, job = upload(upload_service, "notes", "alice")
    run_ingest(upload_service.store, task_id, job)
    assert upload_service.store.task(task_id, None)["status"] == "finished"
    task_id, job = upload(upload_service, "notes", "alice", [{"id": "ants", "text": "ants farm aphids"}])
    fail(upload_service, task_id, job)
    assert upload_service.store.index("notes")["owner"] == "alice"
    page = upload_service.indices.documents("notes", "alice", 0, 10)
    assert [d["id"] for d in page["documents"]] == ["bees"]
