"""An upload's refusal names the field the client sent, as docs/serving.md promises (``documents.3.id``): ``param``
was ``documents`` whatever the document's field, while the message named ``documents.0.id``; a metadata key or
value is named by its key (``documents.0.metadata.year``), and a value no kind of metadata takes is one problem,
not pydantic's four (``metadata.n.str: ...; metadata.n.int: ...``). A refusal of documents read from files names
``files``, the field the client sent them in. Through the API's app on localhost, without Ray."""

from __future__ import annotations

import json

import pytest
import requests

from serve.tasks.ingest_task import run_ingest
from tests.serve.conftest import api_on_localhost, upload

GOOD = {"id": "ok", "text": "honey bees"}


@pytest.mark.parametrize("document, param, says", [
    ({"text": "x"}, "documents.1.id", "Field required"),
    ({"id": "  ", "text": "x"}, "documents.1.id", "the id is blank"),
    ({"id": 5, "text": "x"}, "documents.1.id", "valid string"),
    ({"id": "..", "text": "x"}, "documents.1.id", "cannot be read back"),
    ({"id": "a" * 300, "text": "x"}, "documents.1.id", "at most 200 characters"),
    ({"id": "a"}, "documents.1.text", "Field required"),
    ({"id": "a", "text": " "}, "documents.1.text", "the text is blank"),
    ({"id": "a", "text": 5}, "documents.1.text", "valid string"),
    ({"id": "a", "text": "x", "metadata": {"year": 1, "text": 1}}, "documents.1.metadata.text", "metadata key 'text'"),
    ({"id": "a", "text": "x", "metadata": {"1abc": 1}}, "documents.1.metadata.1abc", "metadata key '1abc'"),
    ({"id": "a", "text": "x", "metadata": {"n": float("nan")}}, "documents.1.metadata.n", "nan is not a number"),
    ({"id": "a", "text": "x", "body": "y"}, "documents.1.body", "Extra inputs"),
    ({"id": "a", "text": "x", "metadata": {"n": {"x": 1}}}, "documents.1.metadata.n",
     "must be a string, a number or a boolean, not an object"),
])
def test_a_bad_document_is_a_422_whose_param_is_its_field(base, document, param, says):
    body = json.dumps({"documents": [GOOD, document]})  # json.dumps writes NaN, as Python's clients do
    answer = requests.post(f"{base}/v1/indices/fresh/documents", data=body, timeout=60,
                           headers={"Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["param"] == param and error["message"].startswith(f"{param}: "), error
    assert says in error["message"] and ".str" not in error["message"], error


def test_an_id_given_twice_names_its_second_place(base):
    answer = requests.post(f"{base}/v1/indices/fresh/documents", json={"documents": [GOOD, GOOD]}, timeout=60)
    assert answer.status_code == 422, answer.text
    assert (answer.json()["error"]["param"], answer.json()["error"]["code"]) == ("documents.1.id", "duplicate_id")


def test_files_that_give_one_id_twice_are_refused_naming_files(base):
    sent = [("files", ("notes.txt", b"honey bees", "text/plain"))] * 2
    answer = requests.post(f"{base}/v1/indices/fresh/files", files=sent, timeout=60)
    assert answer.status_code == 422, answer.text
    assert (answer.json()["error"]["param"], answer.json()["error"]["code"]) == ("files", "duplicate_id")


@pytest.mark.integration  # MiniLM loads in this process
def test_a_file_sent_again_is_a_409_naming_files(upload_service):
    task_id, job = upload(upload_service, "notes", "local", [{"id": "kea.txt", "text": "the kea is a parrot"}])
    run_ingest(upload_service.store, task_id, job)
    with api_on_localhost() as url:
        sent = [("files", ("kea.txt", b"the kea is a parrot of the mountains", "text/plain"))]
        answer = requests.post(f"{url}/v1/indices/notes/files", files=sent, timeout=60)
    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["code"], error["ids"]) == ("files", "documents_exist", ["kea.txt"]), error
