"""A refused upload leaves nothing on disk: not its file, nor the ``uploads/<name>/`` folder it made for a new index
name (a 422 ingest_refused, a 429 max_tasks_per_key); a folder that holds another upload's file stays. And a deleted
index is let go by the process that deleted it: searched again under the same name, it is the new index. Real
uploads accepted by ``Service`` (real SQLite task store), ingested by the task's own code (``run_ingest``) with
MiniLM in this process."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from operators.registry import create
from operators.retrieve import _index_retriever as cache
from serve.indices.documents import DocumentsRequest
from serve.http.errors import ApiError
from serve.tasks.ingest_task import run_ingest
from tests.serve.conftest import upload

pytestmark = pytest.mark.integration  # MiniLM loads in this process


def refused(service, name: str, tenant: str, **body) -> ApiError:
    request = DocumentsRequest.model_validate({"documents": [{"id": "a", "text": "some text"}], **body})
    with pytest.raises(ApiError) as err:
        service.indices.add(name, request, tenant)
    return err.value


def test_an_upload_refused_for_a_new_name_leaves_no_folder(upload_service):
    uploads = upload_service.indices.uploads
    err = refused(upload_service, "static", "alice", spec="ingest_static")  # its encoder is not on this machine
    assert (err.status, err.code, err.param) == (422, "ingest_refused", "spec"), err
    home = str(upload_service.indices.folder.parent)  # the server's folders stay its own (the models' was named)
    assert "$TESSERA_HOME/models" in err.message and home not in err.message and "/tmp" not in err.message, err.message
    assert not (uploads / "static").exists() and not (upload_service.indices.folder / "static").exists()

    limit = upload_service.limits.max_tasks_per_key
    for i in range(limit):  # queued, not run: the key's every task slot is taken
        upload(upload_service, f"slot{i}", "alice")
    err = refused(upload_service, "late", "alice")
    assert (err.status, err.code) == (429, "max_tasks_per_key"), err
    assert not (uploads / "late").exists()
    assert sorted(p.name for p in uploads.iterdir()) == [f"slot{i}" for i in range(limit)]
    assert upload_service.store.index("late") is None

    upload_service.limits = upload_service.limits.model_copy(update={"max_tasks": limit})  # every key's together
    err = refused(upload_service, "other", "bob")
    assert (err.status, err.code, err.headers) == (429, "max_tasks", {"Retry-After": "10"}), err
    assert not (uploads / "other").exists() and upload_service.store.index("other") is None


def test_a_refused_upload_keeps_a_folder_that_holds_another_upload(upload_service):
    task_id, job = upload(upload_service, "notes", "alice")
    err = refused(upload_service, "notes", "alice")  # its first upload is still queued
    assert (err.status, err.code) == (409, "index_busy"), err
    assert [p.name for p in Path(job["source"]).parent.iterdir()] == [Path(job["source"]).name]


def search(path: Path, text: str) -> list[str]:
    op = create("retrieve.bm25", {"index": str(path), "k": 5})
    return op(pa.table({"qid": ["q"], "query": [text]})).column("doc_id").to_pylist()


def test_a_deleted_index_is_let_go_and_its_name_made_again_serves_the_new_documents(upload_service):
    task_id, job = upload(upload_service, "notes", "alice")
    run_ingest(upload_service.store, task_id, job)
    path = Path(job["index_path"])
    assert search(path, "honey bees") == ["bees"]
    old = cache.shared_index(path)

    assert upload_service.indices.delete("notes", "alice") == {"index": "notes", "deleted": True}
    assert str(path.resolve()) not in cache._indices

    task_id, job = upload(upload_service, "notes", "alice", [{"id": "ants", "text": "ants farm aphids for honey"}])
    run_ingest(upload_service.store, task_id, job)
    assert upload_service.store.task(task_id, None)["status"] == "finished"
    assert search(path, "honey bees") == ["ants"]
    assert cache.shared_index(path) is not old


def test_deleting_an_index_deletes_its_ended_ingestions_and_their_chats_and_no_other_task(upload_service):
    """Its latest ingestion could not be deleted while the index read it ("it goes with the index"), yet stayed
    when the index went: every upload of a deleted index was a row of the caller's tasks for the retention's days."""
    service = upload_service
    first, job = upload(service, "notes", "alice")
    run_ingest(service.store, first, job)
    second, job = upload(service, "notes", "alice", [{"id": "ants", "text": "ants farm aphids for honey"}])
    run_ingest(service.store, second, job)
    other, job = upload(service, "other", "alice")
    run_ingest(service.store, other, job)
    chat = service.store.create_chat("alice", second, "local", "text")
    with pytest.raises(ApiError) as err:
        service.delete(second, "alice")
    assert err.value.code == "task_of_index"

    assert service.indices.delete("notes", "alice") == {"index": "notes", "deleted": True}
    assert service.store.task(first, None) is None and service.store.task(second, None) is None
    assert service.store.chat(chat, None) is None
    assert service.store.task(other, None)["status"] == "finished"  # another index's ingestion stays
