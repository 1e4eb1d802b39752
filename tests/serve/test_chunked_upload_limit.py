"""An upload over ``max_upload_bytes`` sent without a length (``Transfer-Encoding: chunked``) is the same 413
naming ``max_upload_bytes`` as one whose ``Content-Length`` says so, not a 400 ``invalid_body``: the limit stops
the form while it is read. Over real HTTP: the API's app under uvicorn on 127.0.0.1 without Ray, beside a
``Service`` over a real SQLite task store; nothing is queued."""

from __future__ import annotations

import pytest
import requests

from serve.security import auth
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import api_on_localhost

LIMIT = 100_000


@pytest.fixture
def files_url(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    Service(resolve(args, environ={}), [], "tessera")
    auth.configure({}, None, LIMIT)
    try:
        with api_on_localhost() as base:
            yield base + "/v1/indices/notes/files"
    finally:
        auth.configure({}, None, None)


def form(size: int) -> tuple[bytes, str]:
    """A multipart body with one text file of ``size`` bytes, and its content type."""
    boundary = "tesseraboundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.txt\"\r\n"
            f"Content-Type: text/plain\r\n\r\n").encode() + b"a " * (size // 2) + f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def chunks(body: bytes, size: int = 16_384):
    for start in range(0, len(body), size):
        yield body[start:start + size]


@pytest.mark.parametrize("chunked", [False, True])
def test_an_upload_over_max_upload_bytes_is_a_413_naming_the_limit(files_url, chunked):
    body, content_type = form(3 * LIMIT)
    response = requests.post(files_url, data=chunks(body) if chunked else body,
                             headers={"Content-Type": content_type}, timeout=60)
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("max_upload_bytes", "body") and f"max_upload_bytes={LIMIT}" in \
        error["message"]
