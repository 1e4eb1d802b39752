"""Files from a Windows machine sent to ``POST /v1/indices/{name}/files`` over real HTTP (the API's app served by
uvicorn on 127.0.0.1 beside a ``Service`` over a real SQLite task store, as ``test_upload_form.py`` starts it): each is
refused before a task is queued, with a 422 naming the file and what to do. (A file sent under its Windows path,
``C:\\Users\\me\\a.txt``, as Internet Explorer sent it, is cut to its name by python-multipart.)"""

from __future__ import annotations

import csv
import io
import json

import pytest
import requests

from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import api_on_localhost

pytestmark = pytest.mark.data


@pytest.fixture
def base(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    Service(resolve(args, environ={}), [], "tessera")
    with api_on_localhost() as base:
        yield base + "/v1/indices/notes/files"


@pytest.fixture
def abstract(shared_data) -> dict:
    with open(shared_data / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        return json.loads(next(f))


def refusal(response: requests.Response) -> str:
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == ("files", "invalid_file"), error
    return error["message"]


def test_a_semicolon_csv_of_real_text_is_a_422_naming_the_delimiter(base, abstract):
    """Excel's CSV in much of Europe, Windows line ends: it was 'line 2: 11 field(s) where the header has 1'."""
    out = io.StringIO(newline="")
    csv.writer(out, delimiter=";", lineterminator="\r\n").writerows(
        [("_id", "title", "text"), (abstract["_id"], abstract["title"], abstract["text"])])
    sent = [("files", ("export.csv", b"\xef\xbb\xbf" + out.getvalue().encode("utf-8"), "text/csv"))]
    assert refusal(requests.post(base, files=sent, timeout=30)).startswith(
        "files: export.csv: the header row is one column, '_id;title;text': its fields are separated by ';', not ','")
