"""An upload whose metadata value the index's column cannot take is refused before it is queued (422
``metadata_type_conflict``, naming the field and both types), as ids already in the index are (409): it was a 202,
and then its task failed at the commit (``column 'year' is string, but it is double in shard ...``). Integers and
floats in one column merge to a float column, so an integer is still taken by a column of floats. Nothing of a
refused upload is stored: no file under ``uploads/``, no task.

The index is made by a real upload, ingested by its task's own code (``run_ingest``) with MiniLM in this process;
the uploads refused are sent over real HTTP (the API's app under uvicorn on 127.0.0.1, without Ray)."""

from __future__ import annotations

import pyarrow as pa
import pytest
import requests

from operators.store import Index
from serve.tasks.ingest_task import run_ingest
from tests.serve.conftest import api_on_localhost, upload

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # MiniLM loads and ingests in this process

YEARS = [2019, 2024, 2024.5]


@pytest.fixture
def notes(upload_service):
    """The API, keyless, over ``upload_service`` whose index ``notes`` holds a document per year of ``YEARS``."""
    task_id, job = upload(upload_service, "notes", "local", [
        {"id": f"y{n}", "text": f"a note written in {year}", "metadata": {"year": year, "kind": "note"}}
        for n, year in enumerate(YEARS)])
    run_ingest(upload_service.store, task_id, job)
    assert upload_service.store.task(task_id, None)["status"] == "finished"
    with api_on_localhost() as base:
        yield base + "/v1/indices/notes", upload_service


def refusal(answer: requests.Response) -> dict:
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["type"]) == ("metadata_type_conflict", "invalid_request_error"), error
    return error


def test_a_value_whose_type_clashes_with_the_index_column_is_a_422_before_anything_is_queued(notes):
    url, service = notes
    # integers beside a float in one upload: the column is a float one (docs/serving.md, docs/indices.md)
    assert Index.open(service.indices.folder / "notes").docs_schema().field("year").type == pa.float64()
    listed = requests.get(url + "/documents", timeout=30).json()["documents"]
    assert [(d["id"], repr(d["metadata"]["year"])) for d in listed] == [("y0", "2019.0"), ("y1", "2024.0"),
                                                                        ("y2", "2024.5")]
    tasks = len(service.store.list_tasks("local"))

    text_year = {"id": "s1", "text": "a note of some year", "metadata": {"year": "twenty twenty"}}
    error = refusal(requests.post(url + "/documents", json={"documents": [text_year]}, timeout=60))
    assert error["param"] == "documents.0.metadata.year", error
    assert ("documents.0 ('s1'): metadata 'year' is string (\"twenty twenty\"), but index 'notes' holds column 'year' "
            "as double; these do not merge") in error["message"], error
    assert str(service.indices.folder) not in error["message"]

    # the second document's, with replace too; a bool is no number for a double column
    both = [{"id": "y0", "text": "again", "metadata": {"year": 2019}},
            {"id": "s2", "text": "flagged", "metadata": {"year": True}}]
    error = refusal(requests.post(url + "/documents", json={"documents": both, "replace": True}, timeout=60))
    assert error["param"] == "documents.1.metadata.year" and "'year' is bool (true)" in error["message"], error

    # a Markdown file's front matter is metadata too: the file named, as ``files``
    page = ("---\nkind: 7\n---\n# Seven\nseven notes\n").encode()
    error = refusal(requests.post(url + "/files", files={"files": ("seven.md", page)}, timeout=60))
    assert error["param"] == "files" and error["message"].startswith(
        "seven.md: document 'seven.md': metadata 'kind' is int64 (7), but index 'notes' holds column 'kind' as "
        "string"), error

    assert not any((service.indices.uploads / "notes").iterdir())  # no file written for a task
    assert len(service.store.list_tasks("local")) == tasks  # and none queued

    # an integer in the float column merges: accepted, as before (queued in-process: no Ray to start its task)
    task_id, _ = upload(service, "notes", "local", [{"id": "s3", "text": "later", "metadata": {"year": 2030}}])
    assert service.store.task(task_id, None)["status"] == "queued"
