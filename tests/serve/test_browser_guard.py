"""A service without keys on loopback answers this machine's clients, not a web page (serve/security/browser_guard.py):
a page on any site sent a cross-origin multipart upload (no CORS preflight needed) and an ingestion task was queued for
it, and a page whose name was rebound to 127.0.0.1 read the indices. Through the FastAPI app on uvicorn, without Ray."""

from __future__ import annotations

import pytest
import requests

from serve.security import browser_guard
from tests.serve.conftest import api_on_localhost

EVIL = "http://evil.example"


@pytest.fixture
def local_only():
    browser_guard.configure(local_only=True)
    yield
    browser_guard.configure(local_only=False)


@pytest.fixture
def base(make_service, local_only):
    make_service()
    with api_on_localhost() as url:
        yield url


def test_a_cross_origin_upload_is_refused_before_anything_is_queued(base):
    files = {"files": ("planted.txt", b"text a page planted", "text/plain")}
    answer = requests.post(base + "/v1/indices/planted/files", files=files, headers={"Origin": EVIL}, timeout=60)
    assert answer.status_code == 403, answer.text
    assert (answer.json()["error"]["param"], answer.json()["error"]["code"]) == ("Origin", "cross_origin")
    assert requests.get(base + "/tasks", timeout=60).json()["tasks"] == []
    names = [index["name"] for index in requests.get(base + "/v1/indices", timeout=60).json()["indices"]]
    assert "planted" not in names


@pytest.mark.parametrize("headers", [{"Origin": "null"}, {"Sec-Fetch-Site": "cross-site"},
                                     {"Sec-Fetch-Site": "same-site"}])
def test_a_request_a_browser_marks_as_from_elsewhere_is_refused(base, headers):
    answer = requests.get(base + "/task/cancel/0123", headers=headers, timeout=60)
    assert answer.status_code == 403, answer.text
    assert answer.json()["error"]["param"] == next(iter(headers))


def test_a_rebound_host_name_is_refused(base):
    port = base.rsplit(":", 1)[1]
    for host in ("evil.example", "128.1", "[::ffff:10.0.0.1]", "0x7f.1.evil.example"):
        answer = requests.get(base + "/v1/indices", headers={"Host": f"{host}:{port}"}, timeout=60)
        assert answer.status_code == 403, (host, answer.text)
        assert (answer.json()["error"]["param"], answer.json()["error"]["code"]) == ("Host", "host_not_allowed")


def test_the_services_own_pages_and_clients_are_answered(base):
    port = base.rsplit(":", 1)[1]
    for headers in ({}, {"Origin": base, "Sec-Fetch-Site": "same-origin"}, {"Host": f"localhost:{port}"},
                    {"Host": f"[::1]:{port}"}, {"Host": f"127.1:{port}"}, {"Host": f"[::ffff:127.0.0.1]:{port}"},
                    {"Sec-Fetch-Site": "none"}):
        assert requests.get(base + "/v1/indices", headers=headers, timeout=60).status_code == 200, headers
    # a link to the web UI from another page still opens it: the page holds no data
    page = requests.get(base + "/ui/", headers={"Sec-Fetch-Site": "cross-site"}, timeout=60)
    assert page.status_code == 200 and "<html" in page.text


def test_with_keys_the_key_decides(make_service, local_only):
    from serve.service_settings import key_hash

    key = "k" * 32
    make_service()
    with api_on_localhost({key_hash(key): "alice"}) as url:
        answer = requests.get(url + "/v1/indices", headers={"Origin": EVIL, "Authorization": f"Bearer {key}"},
                              timeout=60)
        assert answer.status_code == 200, answer.text
        assert requests.get(url + "/v1/indices", headers={"Origin": EVIL}, timeout=60).status_code == 401
        twice = [("Host", url.removeprefix("http://"))] * 2 + [("Authorization", f"Bearer {key}")]
        assert _sent(url, twice)[0] == 400  # one Host in either mode


def _sent(base: str, headers: list[tuple[str, str]]) -> tuple[int, dict]:
    """A GET of /v1/indices with ``headers`` as given, one repeated too (``requests`` sends each name once)."""
    import http.client
    import json

    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.putrequest("GET", "/v1/indices", skip_host=True)
        for name, value in headers:
            connection.putheader(name, value)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


@pytest.mark.parametrize("name, values", [("Host", ["evil.example", "127.0.0.1"]),
                                          ("Origin", [EVIL, "own"]),
                                          ("Sec-Fetch-Site", ["cross-site", "same-origin"])])
def test_a_header_the_guard_reads_sent_twice_is_refused_naming_it(base, name, values):
    """The guard read the last of two ``Host`` (or ``Origin``) headers: a loopback one after a rebound name passed,
    while a proxy in front may have read the first."""
    port = base.rsplit(":", 1)[1]
    own = [("Host", f"127.0.0.1:{port}")] if name != "Host" else []
    sent = [(name, f"{value}:{port}" if name == "Host" else base if value == "own" else value) for value in values]
    status, body = _sent(base, own + sent)
    assert status == 400, body
    assert (body["error"]["param"], body["error"]["code"]) == (name, "duplicate_header")
    assert "not 2" in body["error"]["message"]
    assert _sent(base, own + sent[-1:])[0] == 200  # the last alone is this machine's own
