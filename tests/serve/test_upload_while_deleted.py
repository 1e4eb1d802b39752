"""An upload sent while its index is being deleted (``DELETE /v1/indices/{name}``): whichever lands first, every
accepted document ends up in the index, and every answer is a documented one. Before, a delete that went through
while an upload was being checked took the upload's file (and the new index's owner file) with the index's folders:
the upload was accepted (202) and its task then failed, its documents lost.

Each race is made to happen: a real DELETE over HTTP lands just before the upload is queued
(``TaskStore.create_ingest_task``), and a real upload over HTTP lands between the delete's removal of the index's
record and the removal of its folders (just after ``TaskStore.forget_index``). Real HTTP on 127.0.0.1 (the service's
FastAPI app under uvicorn), a real SQLite task store, and each upload's ingestion on a Ray actor (MiniLM and BM25)."""

from __future__ import annotations

import json
import time

import httpx
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def base(ray_session, upload_service):
    from tests.serve.conftest import api_on_localhost

    with api_on_localhost() as url:
        yield url


def upload(base: str, doc_id: str) -> httpx.Response:
    return httpx.post(f"{base}/v1/indices/notes/documents", timeout=120,
                      json={"documents": [{"id": doc_id, "text": f"{doc_id} live in the garden"}]})


def finished(base: str, task_id: str, timeout_s: float = 240) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        body = httpx.get(f"{base}/task/progress/{task_id}", timeout=30).json()
        if body["has_finished"]:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.2)


def documents(base: str) -> list[str]:
    listed = httpx.get(f"{base}/v1/indices/notes/documents", timeout=60)
    assert listed.status_code == 200, listed.text
    return [d["id"] for d in listed.json()["documents"]]


def uploaded(base: str, doc_id: str) -> None:
    added = upload(base, doc_id)
    assert added.status_code == 202, added.text
    assert finished(base, added.json()["task_id"])["status"] == "finished"


def assert_made_anew_with(base: str, service, added: httpx.Response, doc_ids: list[str]) -> None:
    """The accepted upload's task finished into a new index holding its documents alone, owned by its key."""
    assert added.status_code == 202, added.text
    done = finished(base, added.json()["task_id"])
    assert done["status"] == "finished", done
    assert documents(base) == doc_ids
    owner = json.loads((service.indices.folder / "notes" / "owner.json").read_text())
    assert owner["owner"] == "local" and service.store.index("notes")["ingest_task"] == added.json()["task_id"]


def test_an_index_deleted_while_an_upload_is_checked_is_made_anew_by_the_upload(base, upload_service, monkeypatch):
    uploaded(base, "bees")
    store, deletes = upload_service.store, []
    real = store.create_ingest_task

    def deleted_first(*args, **kwargs):
        if not deletes:
            deletes.append(httpx.delete(f"{base}/v1/indices/notes", timeout=60))
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "create_ingest_task", deleted_first)
    added = upload(base, "ants")
    assert [d.status_code for d in deletes] == [200], [d.text for d in deletes]
    assert_made_anew_with(base, upload_service, added, ["ants"])


def test_an_upload_between_a_deletes_record_and_its_folders_keeps_its_documents(base, upload_service, monkeypatch):
    uploaded(base, "bees")
    store, uploads = upload_service.store, []
    real = store.forget_index

    def then_uploaded(*args, **kwargs):
        why = real(*args, **kwargs)
        if not uploads:
            uploads.append(upload(base, "wasps"))
        return why

    monkeypatch.setattr(store, "forget_index", then_uploaded)
    deleted = httpx.delete(f"{base}/v1/indices/notes", timeout=120)
    assert deleted.status_code == 200, deleted.text
    assert_made_anew_with(base, upload_service, uploads[0], ["wasps"])
