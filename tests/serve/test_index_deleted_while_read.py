"""An index deleted (``DELETE /v1/indices/{name}``) while another request reads or changes it: a search, the listing
of its documents, one document, deleting documents. That request answers the 404 ``index_not_found`` of an index
that is gone, never the 500 of a damaged index (its shards' files vanished under the reader when the folder was moved
aside). An upload checking its ids against an index deleted meanwhile goes on and makes the index anew.

Each race is made to happen: a real DELETE over HTTP lands just before the request reads the index's shards (the
store function it calls next is wrapped to send the DELETE first and wait for its 200). The service's FastAPI app
under uvicorn on 127.0.0.1, a real BM25 index made by the service's owner rules and a real SQLite task store; no
Ray."""

from __future__ import annotations

import threading

import httpx
import pytest

from operators.store import Index
from serve.indices import indices as indices_module
from tests.serve.conftest import api_on_localhost, uploaded_index
from tests.text_checks import TRACEBACK


@pytest.fixture
def app(upload_service):
    """The API over ``upload_service`` with the index ``notes`` (two documents), made as an upload would make it."""
    uploaded_index(upload_service)
    with api_on_localhost() as base:
        yield base, upload_service


def deleted_first(base: str, target, attribute: str, monkeypatch) -> list[httpx.Response]:
    """Wrap ``target.attribute`` so that its next call first deletes ``notes`` over HTTP; the DELETE's answers."""
    real, armed, deletes = getattr(target, attribute), threading.Event(), []

    def wrapped(*args, **kwargs):
        if armed.is_set():
            armed.clear()
            deletes.append(httpx.delete(f"{base}/v1/indices/notes", timeout=60))
        return real(*args, **kwargs)

    monkeypatch.setattr(target, attribute, wrapped)
    armed.set()
    return deletes


def assert_gone(response: httpx.Response, deletes: list[httpx.Response], param: str) -> None:
    assert [d.status_code for d in deletes] == [200], [d.text for d in deletes]
    assert response.status_code == 404, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == (param, "index_not_found"), error
    assert "notes" in error["message"] and TRACEBACK not in response.text


def test_a_search_of_an_index_deleted_while_it_loads_its_shards_is_a_404(app, monkeypatch):
    """The search read the manifest, then the index went before its shards were loaded."""
    from operators.store import snapshot

    base, _ = app
    deletes = deleted_first(base, snapshot, "load", monkeypatch)
    searched = httpx.post(f"{base}/v1/search", json={"flow": "bm25", "query": "honey", "index": "notes"}, timeout=60)
    assert_gone(searched, deletes, "index")


def test_listing_the_documents_of_an_index_deleted_meanwhile_is_a_404(app, monkeypatch):
    from operators.store import listing

    base, _ = app
    deletes = deleted_first(base, listing, "document_page", monkeypatch)
    listed = httpx.get(f"{base}/v1/indices/notes/documents", timeout=60)
    assert_gone(listed, deletes, "name")


def test_reading_a_document_of_an_index_deleted_meanwhile_is_a_404(app, monkeypatch):
    base, _ = app
    deletes = deleted_first(base, Index, "passages_of", monkeypatch)
    read = httpx.get(f"{base}/v1/indices/notes/documents/bees", timeout=60)
    assert_gone(read, deletes, "name")


def test_deleting_documents_of_an_index_deleted_meanwhile_is_a_404(app, monkeypatch):
    base, _ = app
    deletes = deleted_first(base, indices_module, "live_doc_ids", monkeypatch)
    deleted = httpx.post(f"{base}/v1/indices/notes/delete", json={"ids": ["bees"]}, timeout=60)
    assert_gone(deleted, deletes, "name")



def test_an_index_deleted_between_finding_and_reading_its_manifest_is_a_404(app, monkeypatch):
    """The manifest was there when the listing looked, and gone when it read it."""
    from operators.store import layout

    base, _ = app
    deletes = deleted_first(base, layout, "_read_json", monkeypatch)
    listed = httpx.get(f"{base}/v1/indices/notes/documents", timeout=60)
    assert_gone(listed, deletes, "name")
