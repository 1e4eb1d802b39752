"""A saved flow deleted while another request reads it (the same name saved, run and deleted at once): the reader
answers as if the flow were not there, a 404 naming ``name`` (``GET /flows/{name}``, the second of two deletes) or the
run's 422 ``no flow named`` on ``flow`` (``POST /v1/search``), never a 500 or a message with the server's path. A key
never reads or deletes another key's flow of the same name meanwhile.

Each race is made to happen, not hoped for: a real ``DELETE /flows/{name}`` over HTTP lands just after the reader
found the flow's file (``flows.store.saved_path`` is wrapped to send it there and wait for its 200). The service's
FastAPI app under uvicorn on 127.0.0.1, with two keys; no Ray (nothing is queued)."""

from __future__ import annotations

import threading

import httpx
import pytest

from flows import store as flow_store
from operators.api_keys import key_hash
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import api_on_localhost
from tests.text_checks import TRACEBACK

ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"


def spec(k: int) -> dict:
    return {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": k}}}}


@pytest.fixture
def base(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "indices" / "news").mkdir(parents=True)
    monkeypatch.setenv("TESSERA_HOME", str(home))
    args = ServiceArgs(default_index=str(home / "indices" / "news"), task_store=f"sqlite:///{tmp_path / 'tasks.db'}",
                       spare_task_workers=0, api_keys=[{"id": "alice", "sha256": key_hash(ALICE)},
                                                       {"id": "bob", "sha256": key_hash(BOB)}])
    config = resolve(args, environ={})
    Service(config, [], "tessera").warming.join(timeout=120)
    with api_on_localhost(config["keys"]) as url:
        yield url


def call(method: str, url: str, key: str, **kwargs) -> httpx.Response:
    return httpx.request(method, url, headers={"Authorization": f"Bearer {key}"}, timeout=60, **kwargs)


@pytest.fixture
def deleted_once_found(base, monkeypatch):
    """Arm the race: the next time a request finds alice's saved flow ``same``, alice deletes it over HTTP before that
    request goes on; ``deletes`` holds that DELETE's answer."""
    real, armed, deletes = flow_store.saved_path, threading.Event(), []

    def found_then_deleted(name, owner=None):
        path = real(name, owner)
        if path is not None and name == "same" and owner == "alice" and armed.is_set():
            armed.clear()  # the DELETE's own lookups find the file as usual
            deletes.append(call("DELETE", f"{base}/flows/same", ALICE))
        return path

    monkeypatch.setattr(flow_store, "saved_path", found_then_deleted)
    for key, k in ((ALICE, 3), (BOB, 4)):
        assert call("PUT", f"{base}/flows/same", key, json=spec(k)).status_code == 201
    armed.set()
    return deletes


def assert_only_bobs_flow_is_left(base: str) -> None:
    mine = call("GET", f"{base}/flows/same", BOB)
    assert mine.status_code == 200 and mine.json()["steps"]["bm25"]["params"]["k"] == 4, mine.text
    assert call("GET", f"{base}/flows", BOB).json()["saved"] == ["same"]
    assert call("GET", f"{base}/flows", ALICE).json()["saved"] == []


def assert_clean(response: httpx.Response, home_marker: str = "/home/") -> None:
    assert TRACEBACK not in response.text and home_marker not in response.text, response.text


def test_a_flow_deleted_while_it_is_read_is_a_404(base, deleted_once_found):
    read = call("GET", f"{base}/flows/same", ALICE)
    assert [d.status_code for d in deleted_once_found] == [200]
    assert read.status_code == 404, read.text
    assert (read.json()["error"]["param"], read.json()["error"]["code"]) == ("name", "flow_not_found")
    assert_clean(read)
    assert_only_bobs_flow_is_left(base)


def test_a_flow_deleted_while_a_search_resolves_it_is_no_flow_of_that_name(base, deleted_once_found):
    searched = call("POST", f"{base}/v1/search", ALICE, json={"flow": "same", "query": "honey bees"})
    assert [d.status_code for d in deleted_once_found] == [200]
    assert searched.status_code == 422, searched.text
    error = searched.json()["error"]
    assert error["param"] == "flow" and error["message"].startswith("field 'flow': no flow named 'same'"), error
    assert_clean(searched)
    assert_only_bobs_flow_is_left(base)


def test_of_two_deletes_of_one_flow_at_once_the_second_is_a_404(base, deleted_once_found):
    second = call("DELETE", f"{base}/flows/same", ALICE)
    assert [d.status_code for d in deleted_once_found] == [200]
    assert second.status_code == 404, second.text
    assert (second.json()["error"]["param"], second.json()["error"]["code"]) == ("name", "flow_not_found")
    assert_clean(second)
    assert_only_bobs_flow_is_left(base)
