"""The 409 ``documents_exist`` over real HTTP (the API's app under uvicorn on 127.0.0.1, without Ray): its error
object lists the ids already in the index in ``ids``, in the order sent (the first ``LISTED_IDS``), and counts them
all in ``ids_total``, so a client drops or replaces them without reading the message. The index is made by a real
upload, ingested by its task's own code with MiniLM in this process; the refused request queues nothing."""

from __future__ import annotations

import pytest
import requests

from serve.indices import index_reading
from serve.tasks.ingest_task import run_ingest
from tests.serve.conftest import api_on_localhost, upload

pytestmark = pytest.mark.integration  # MiniLM loads in this process

BIRDS = ["kakapo", "takahe", "kea"]


@pytest.fixture
def notes(upload_service):
    """The API, keyless (every caller is ``local``), over ``upload_service`` whose index ``notes`` holds ``BIRDS``."""
    task_id, job = upload(upload_service, "notes", "local",
                          [{"id": bird, "text": f"the {bird} is a bird of New Zealand"} for bird in BIRDS])
    run_ingest(upload_service.store, task_id, job)
    assert upload_service.store.task(task_id, None)["status"] == "finished"
    with api_on_localhost() as base:
        yield base + "/v1/indices/notes/documents", upload_service


def send(url: str, ids: list[str]) -> requests.Response:
    return requests.post(url, json={"documents": [{"id": i, "text": f"about {i}"} for i in ids]}, timeout=60)


def test_the_409_lists_the_ids_already_in_the_index(notes):
    url, service = notes
    refused = send(url, ["weta", "kea", "kakapo", "tui"])
    assert refused.status_code == 409, refused.text
    err = refused.json()["error"]
    assert (err["code"], err["param"], err["type"]) == ("documents_exist", "documents", "invalid_request_error")
    assert err["ids"] == ["kea", "kakapo"] and err["ids_total"] == 2
    assert err["message"] == ("2 document id(s) are in the index already: 'kea', 'kakapo'; send them with replace: "
                              "true to replace them")
    assert not any((service.indices.uploads / "notes").iterdir())  # nothing queued: only the first upload was


def test_the_ids_are_capped_and_the_total_counts_them_all(notes, monkeypatch):
    monkeypatch.setattr(index_reading, "LISTED_IDS", 2)
    err = send(notes[0], ["takahe", "kea", "kakapo"]).json()["error"]
    assert err["ids"] == ["takahe", "kea"] and err["ids_total"] == 3, err
    assert "'takahe', 'kea', 'kakapo'" in err["message"]  # the message names up to SHOWN_IDS, as before
