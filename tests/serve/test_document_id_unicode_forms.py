"""A file named on macOS (``café.txt`` as ``cafe`` + U+0301, NFD) gives its document an NFD id; a client that types
the id (NFC, as keyboards give it) in ``GET /v1/indices/{name}/documents/{id}`` got a 404 ``document_not_found``, and
``POST .../delete`` listed it as missing. The stored id is kept; these lookups find it in either form. Real HTTP on
127.0.0.1 (the service's app under uvicorn), an index ingested in-process from a real folder; no Ray."""

from __future__ import annotations

import time
import unicodedata
from urllib.parse import quote

import requests

from tests.flows.test_cli import tessera_in_process
from tests.serve.conftest import api_on_localhost

NFC, NFD = (unicodedata.normalize(form, "café.txt") for form in ("NFC", "NFD"))


def _notes(service, tmp_path, monkeypatch, capsys) -> None:
    """Index ``notes`` of ``service``, owned by ``local``, ingested from a folder with an NFD-named file."""
    from serve.indices.index_owner import write_owner

    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / NFD).write_text("a café serves espresso and pastries")
    (tmp_path / "notes" / "bees.txt").write_text("honey bees make honey from nectar")
    path = service.indices.folder / "notes"
    home = tmp_path / "home"
    tessera_in_process(monkeypatch, capsys, "ingest", "--source", str(tmp_path / "notes"), "--index", str(path),
                       "--no-dense", "--no-chunk", "--executor", "local", home=home)
    row = {"name": "notes", "owner": "local", "shared": False, "spec": "ingest", "created": time.time(),
           "ingest_task": None}
    write_owner(path, row)
    assert service.store.restore_index(row)


def test_a_document_of_an_nfd_file_name_is_fetched_and_deleted_by_its_nfc_id(make_service, tmp_path, monkeypatch,
                                                                              capsys):
    service = make_service()
    _notes(service, tmp_path, monkeypatch, capsys)
    with api_on_localhost() as base:
        listed = requests.get(f"{base}/v1/indices/notes/documents", timeout=30).json()
        assert sorted(d["id"] for d in listed["documents"]) == sorted(["bees.txt", NFD])  # stored as named
        got = requests.get(f"{base}/v1/indices/notes/documents/{quote(NFC, safe='')}", timeout=30)
        assert got.status_code == 200, got.text
        assert got.json()["id"] == NFD and "espresso" in got.json()["passages"][0]["text"]
        deleted = requests.post(f"{base}/v1/indices/notes/delete", json={"ids": [NFC, "moa"]}, timeout=30)
        assert deleted.json() == {"index": "notes", "deleted": [NFC], "missing": ["moa"], "chunks": 1}, deleted.text
        gone = requests.get(f"{base}/v1/indices/notes/documents/{quote(NFD, safe='')}", timeout=30)
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "document_not_found", gone.text
        listed = requests.get(f"{base}/v1/indices/notes/documents", timeout=30).json()
        assert [d["id"] for d in listed["documents"]] == ["bees.txt"]


def test_an_id_in_neither_of_two_stored_forms_is_a_409_naming_the_field(make_service):
    import pyarrow as pa

    from tests.serve.conftest import uploaded_index

    mixed = "caf\u00e9 lai\u0301t.txt"  # é composed, í not: neither NFC nor NFD
    ids = [unicodedata.normalize("NFC", mixed), unicodedata.normalize("NFD", mixed)]
    service = make_service()
    path = uploaded_index(service)  # bees, ants; then both forms of one name
    from operators.store import Index

    Index.open(path).add(pa.table({"docno": [f"{i}#0" for i in ids], "doc_id": ids,
                                   "title": ["a", "b"], "text": ["one", "two"]}))
    with api_on_localhost() as base:
        got = requests.get(f"{base}/v1/indices/notes/documents/{quote(mixed, safe='')}", timeout=30)
        assert got.status_code == 409 and got.json()["error"]["param"] == "id", got.text
        assert "two Unicode forms" in got.json()["error"]["message"]
        refused = requests.post(f"{base}/v1/indices/notes/delete", json={"ids": [mixed]}, timeout=30)
        assert refused.status_code == 409 and refused.json()["error"]["param"] == "ids", refused.text
        for doc_id in ids:  # nothing was deleted; each form is read back as given
            assert requests.get(f"{base}/v1/indices/notes/documents/{quote(doc_id, safe='')}",
                                timeout=30).json()["id"] == doc_id


def test_an_id_that_differs_only_in_case_is_a_404_naming_the_id_the_index_holds(make_service, tmp_path, monkeypatch,
                                                                                 capsys):
    """``BEES.TXT`` for ``bees.txt`` (Windows and macOS match file names whatever their case): the 404 names the id
    the index holds, as ``tessera index delete`` does."""
    service = make_service()
    _notes(service, tmp_path, monkeypatch, capsys)
    with api_on_localhost() as base:
        got = requests.get(f"{base}/v1/indices/notes/documents/BEES.TXT", timeout=30)
        error = got.json()["error"]
        assert got.status_code == 404 and error["code"] == "document_not_found" and error["param"] == "id", got.text
        assert error["message"].endswith("(ids are case-sensitive: the index holds 'bees.txt' for 'BEES.TXT')")
        missing = requests.get(f"{base}/v1/indices/notes/documents/wasps.txt", timeout=30).json()["error"]
        assert missing["message"] == "index 'notes' has no document with the id 'wasps.txt'", missing
