"""An upload over ``max_upload_bytes`` sent without a length (``Transfer-Encoding: chunked``) is the same 413
naming ``max_upload_bytes`` as one whose ``Content-Length`` says so, not a 400 ``invalid_body``: the limit stops
the form while it is read. The 413 names ``files``, as the form's other refusals do, with the files the form named
(each one's size, at least what came of it) and the request's size where its Content-Length says it. Over real
HTTP: the API's app under uvicorn on 127.0.0.1 without Ray, beside a ``Service`` over a real SQLite task store;
nothing is queued."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest
import requests

from serve.http.upload_parts import PEEK_BYTES
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


def form(size: int, *before: tuple[str, int]) -> tuple[bytes, str]:
    """A multipart body with the text files ``before`` (name, bytes) and then one of ``size`` bytes, ``big.txt``,
    and its content type."""
    boundary = "tesseraboundary"
    body = b"".join(f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"{name}\"\r\n"
                    f"Content-Type: text/plain\r\n\r\n".encode() + b"a " * (length // 2) + b"\r\n"
                    for name, length in [*before, ("big.txt", size)])
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


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
    assert (error["code"], error["param"]) == ("max_upload_bytes", "files") and f"max_upload_bytes={LIMIT}" in \
        error["message"]


def test_the_413_of_an_upload_that_says_its_length_names_the_file_and_the_size(files_url):
    """Refused on its Content-Length before the body is read whole: the first files' names come from the start of
    the form (``PEEK_BYTES``), the size from the header."""
    body, content_type = form(3 * LIMIT)
    response = requests.post(files_url, data=body, headers={"Content-Type": content_type}, timeout=60)
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    read = PEEK_BYTES - body.index(b"\r\n\r\n") - 4  # of the file, in what was read before the 413
    assert error["param"] == "files" and error["message"] == (
        f"files: the upload is over the limit max_upload_bytes={LIMIT} (100,000 bytes of files and their form a "
        f"request): the request is {len(body):,} bytes (its Content-Length); file 'big.txt' (at least {read:,} bytes: "
        "the rest was not read); send fewer or smaller files a request")


def test_the_413_of_a_streamed_upload_names_each_file_with_its_size(files_url):
    """Sent without a length, the files before the one the limit stopped are named with their sizes, that one with
    what came of it."""
    body, content_type = form(3 * LIMIT, ("notes.md", 1000), ("plan (v2).txt", 30_000))
    response = requests.post(files_url, data=chunks(body), headers={"Content-Type": content_type}, timeout=60)
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["param"] == "files" and error["code"] == "max_upload_bytes", error
    said = error["message"]
    assert said.startswith(f"files: the upload is over the limit max_upload_bytes={LIMIT} (100,000 bytes")
    assert "files 'notes.md' (1,000 bytes), 'plan (v2).txt' (30,000 bytes), 'big.txt' (at least " in said, said
    assert "the limit stopped it there); send fewer or smaller files a request" in said and "Content-Length" not in said


def test_a_client_that_waits_for_go_ahead_is_refused_before_it_sends_the_body(files_url):
    """``Expect: 100-continue`` (curl's way with a large file): the 413 comes in place of the "go ahead", so the
    client never sends the body it announced; the names the body would have told are not asked for."""
    url = urlsplit(files_url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as conn:
        conn.sendall(f"POST {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Length: {3 * LIMIT}\r\n"
                     "Content-Type: multipart/form-data; boundary=b\r\nExpect: 100-continue\r\n\r\n".encode())
        reply = conn.recv(65536).decode("latin-1")
    assert reply.startswith("HTTP/1.1 413"), reply[:200]
    assert f"the request is {3 * LIMIT:,} bytes (its Content-Length)" in reply and "file '" not in reply
