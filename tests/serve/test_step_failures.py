"""A step that fails a query once it runs, where its params say ``on_error: error``, answers the client with what
failed: a URL the outbound guard refuses once its host is looked up (``localhost``: loopback) is a 422
``flow_not_runnable`` naming the step's ``url``, and a rerank service that answers 500 a 502 ``step_failed`` naming
the step. Both were a 500 ``internal_error`` whose reason was only in the server's log (a chat's: ``flow_error``).
A real HTTP API on localhost over a real BM25 index, and a real failing rerank server; nothing on Ray."""

from __future__ import annotations

import http.server
import threading

import pytest
import requests


def rerank_flow(url: str) -> dict:
    return {"steps": {"b": {"op": "retrieve.bm25", "params": {"k": 5}},
                      "rr": {"op": "rerank.api", "params": {"url": url, "model": "m", "on_error": "error",
                                                            "max_retries": 0}}}}


@pytest.fixture
def failing_rerank_server():
    """A rerank endpoint on 127.0.0.1 that answers every POST with a 500: its URL."""
    class Failing(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802  (http.server's name)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b'{"message": "the rerank model is down"}'
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Failing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/rerank"
    server.shutdown()
    server.server_close()


def test_a_url_the_guard_refuses_once_its_host_is_looked_up_is_a_422_naming_it(notes_api, monkeypatch):
    monkeypatch.setenv("TESSERA_OUTBOUND", "server")  # the service's policy (a test process may run the CLI's)
    body = {"query": "honey", "index": "notes", "flow": rerank_flow("http://localhost:9/v1/rerank")}
    response = requests.post(notes_api + "/v1/search", json=body, timeout=60)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("flow_not_runnable", "steps.rr.params.url"), error
    assert "loopback" in error["message"] and "TESSERA_ALLOW_HOSTS" in error["message"], error


def test_a_step_that_fails_as_its_params_ask_is_a_502_saying_why(notes_api, failing_rerank_server, monkeypatch):
    monkeypatch.setenv("TESSERA_ALLOW_HOSTS", "127.0.0.1")
    body = {"query": "honey", "index": "notes", "flow": rerank_flow(failing_rerank_server)}
    response = requests.post(notes_api + "/v1/search", json=body, timeout=60)
    assert response.status_code == 502, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"], error["type"]) == ("step_failed", "steps.rr", "server_error"), error
    assert "step 'rr'" in error["message"] and "500" in error["message"], error
    body["flow"]["steps"]["rr"]["params"]["on_error"] = "first_stage"  # the default policy: the search answers
    response = requests.post(notes_api + "/v1/search", json=body, timeout=60)
    assert response.status_code == 200, response.text
    assert [hit["docno"] for hit in response.json()["results"][0]["hits"]] == ["bees#0"]
