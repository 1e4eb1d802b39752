"""An upload to an index whose ingestion runs is a 409 naming the running task, whatever moment of that ingestion it
comes at, and leaves nothing behind. Before, one that came while the first ingestion wrote the index's first manifest
(under a temporary name) was checked against the half-written folder first and refused as a 422 "a folder of other
files, not an index": the running task is now looked at before the folder is read.

Real uploads accepted by ``Service`` (``Indices.add``, what the route answers, without the launch on Ray), a real
SQLite task store; the first task is ingested by the task's own code (``run_ingest``) with MiniLM in this process."""

from __future__ import annotations

import pytest

from serve.indices.documents import DocumentsRequest
from serve.http.errors import ApiError
from serve.tasks.ingest_task import run_ingest

pytestmark = pytest.mark.integration  # MiniLM loads in this process

FIRST = [{"id": "kakapo", "text": "The kakapo is a flightless nocturnal parrot of New Zealand."}]
SECOND = [{"id": "kea", "text": "The kea is an alpine parrot of the South Island."}]


def add(service, documents: list[dict]) -> dict:
    return service.indices.add("birds", DocumentsRequest.model_validate({"documents": documents}), "local")


def test_an_upload_while_the_first_manifest_is_written_is_busy_not_refused(upload_service):
    first = add(upload_service, FIRST)["task_id"]
    upload_service.store.update(first, status="running")
    folder = upload_service.indices.folder / "birds"
    folder.mkdir(parents=True, exist_ok=True)
    writing = folder / ".manifest.json.4242.0123abcd.tmp"  # the moment the ingestion writes the first manifest
    writing.write_text("{")
    with pytest.raises(ApiError) as busy:
        add(upload_service, SECOND)
    writing.unlink()
    assert (busy.value.status, busy.value.code, busy.value.param) == (409, "index_busy", "name")
    assert first in busy.value.message
    assert [p.name for p in (upload_service.indices.uploads / "birds").iterdir()] == \
        [upload_service.store.task(first, None)["spec"]["ingest"]["source"].rsplit("/", 1)[1]]  # the first's alone

    run_ingest(upload_service.store, first, upload_service.store.task(first, None)["spec"]["ingest"])
    assert upload_service.store.task(first, None)["status"] == "finished"
    second = add(upload_service, SECOND)["task_id"]  # once it has finished, the next is queued
    run_ingest(upload_service.store, second, upload_service.store.task(second, None)["spec"]["ingest"])
    assert upload_service.store.task(second, None)["status"] == "finished"
