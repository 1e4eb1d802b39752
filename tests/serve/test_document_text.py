"""``GET /v1/indices/{name}/documents/{id}``: one document of an index with its passages' text, read back over real
HTTP (the API's app under uvicorn on 127.0.0.1, without Ray, beside a ``Service`` over a real SQLite task store),
from indices made by real uploads (JSON documents, a PDF, a Markdown file) ingested in this process with MiniLM.
Ids that need URL-encoding (a '/', '?', '#', '%', a space) are read as they were sent; a deleted document is gone
and a replaced one has its new text only; the listing's access rules hold."""

from __future__ import annotations

from urllib.parse import quote

import pytest
import requests

from operators.api_keys import key_hash
from serve.indices.documents import DocumentsRequest
from serve.tasks.ingest_task import run_ingest
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from tests.conftest import write_pdf
from tests.serve.conftest import api_on_localhost

pytestmark = pytest.mark.integration  # MiniLM loads in this process

ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"

#: Long enough for three passages of the ingest spec's chunker (200 MiniLM word pieces, 32 overlapping).
LONG = " ".join(f"Sentence {n} says that the kakapo of island {n} feeds on rimu fruit at night." for n in range(60))
ODD_ID = "reports/2024 q1?draft#2 100%.txt"
DOCS = [{"id": "kakapo", "title": "Kakapo", "text": LONG, "metadata": {"source": "birds.txt", "year": 2019}},
        {"id": ODD_ID, "text": "Weta are among the heaviest insects in the world."}]


def ingested(service: Service, name: str, tenant: str, documents=None, files=None, replace: bool = False) -> None:
    """Documents (or files) added to index ``name`` and their ingestion run here to its end."""
    if files is not None:
        queued = service.indices.add_files(name, files, None, replace, tenant)
    else:
        queued = service.indices.add(name, DocumentsRequest.model_validate(
            {"documents": documents, "replace": replace}), tenant)
    run_ingest(service.store, queued["task_id"], service.store.task(queued["task_id"], None)["spec"]["ingest"])
    assert service.store.task(queued["task_id"], None)["status"] == "finished"


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    """The API with keys ``alice`` and ``bob``; alice's private index ``shelf`` holds DOCS, a two-page PDF and a
    Markdown file."""
    tmp = tmp_path_factory.mktemp("document-text")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TESSERA_HOME", str(tmp / "home"))
        keys = [{"id": "alice", "sha256": key_hash(ALICE)}, {"id": "bob", "sha256": key_hash(BOB)}]
        args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp / 'tasks.db'}", spare_task_workers=0,
                           api_keys=keys)
        config = resolve(args, environ={})
        service = Service(config, [], "tessera")
        ingested(service, "shelf", "alice", DOCS)
        pdf = write_pdf(tmp / "guide.pdf", ["Page one tells how to feed the takahe.", "Page two is on weta."],
                        title="Field guide")
        notes = b"# Notes\n\nHoney bees keep hives in hollow trees.\n"
        ingested(service, "shelf", "alice", files=[("guide.pdf", pdf.read_bytes()), ("notes.md", notes)])
        with api_on_localhost(config["keys"]) as base:
            yield base, service


def get(base: str, index: str, doc_id: str, key: str = ALICE) -> requests.Response:
    return requests.get(f"{base}/v1/indices/{index}/documents/{quote(doc_id, safe='')}",
                        headers={"Authorization": f"Bearer {key}"}, timeout=30)


def read(base: str, index: str, doc_id: str, key: str = ALICE) -> dict:
    response = get(base, index, doc_id, key)
    assert response.status_code == 200, response.text
    return response.json()


def error(response: requests.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    return response.json()["error"]


def stored_passages(service: Service, index: str, doc_id: str) -> list[tuple[str, str]]:
    """(docno, text) of the live passages of ``doc_id`` as the doc store holds them, in chunk order."""
    from operators.store import Index

    _, table = Index.open(service.indices.folder / index, verify=False).columns(["doc_id", "docno", "text",
                                                                                 "chunk_index"])
    rows = sorted((r for r in table.to_pylist() if r["doc_id"] == doc_id), key=lambda r: r["chunk_index"])
    return [(r["docno"], r["text"]) for r in rows]


def test_a_documents_passages_come_back_in_order_with_its_title_and_metadata_whatever_its_id_holds(app):
    base, service = app
    kakapo = read(base, "shelf", "kakapo")
    assert (kakapo["index"], kakapo["id"], kakapo["title"]) == ("shelf", "kakapo", "Kakapo")
    assert kakapo["metadata"] == {"source": "birds.txt", "year": 2019}
    passages = [(p["docno"], p["text"]) for p in kakapo["passages"]]
    assert len(passages) >= 3 and [docno for docno, _ in passages] == [f"kakapo#{n}" for n in range(len(passages))]
    assert passages == stored_passages(service, "shelf", "kakapo")
    assert passages[0][1].startswith("Sentence 0 says") and passages[-1][1].endswith("island 59 feeds on rimu fruit "
                                                                                     "at night.")
    assert all(f"island {n} " in " ".join(t for _, t in passages) for n in range(60))  # no part of the text is lost

    odd = read(base, "shelf", ODD_ID)  # '/', '?', '#', '%' and a space, URL-encoded
    assert (odd["id"], odd["title"], odd["metadata"]) == (ODD_ID, "", {})
    assert odd["passages"] == [{"docno": f"{ODD_ID}#0", "text": DOCS[1]["text"]}]
    page = read(base, "shelf", "guide-p1")
    assert (page["title"], page["metadata"]) == ("Field guide", {"path": "guide.pdf", "page": 1})
    assert [p["text"] for p in page["passages"]] == ["Page one tells how to feed the takahe."]
    notes = read(base, "shelf", "notes.md")
    assert (notes["title"], notes["metadata"]) == ("Notes", {"path": "notes.md"})
    assert "Honey bees keep hives in hollow trees." in notes["passages"][0]["text"]
    slash = requests.get(f"{base}/v1/indices/shelf/documents/reports/2024%20q1%3Fdraft%232%20100%25.txt",
                         headers={"Authorization": f"Bearer {ALICE}"}, timeout=30)  # the '/' as it is
    assert slash.status_code == 200 and slash.json()["id"] == ODD_ID


def test_who_may_read_a_document_and_what_is_refused_is_as_for_the_listing(app):
    base, service = app
    assert error(get(base, "shelf", "kakapo", BOB), 403)["code"] == "index_not_shared"
    assert error(get(base, "shelf", "no-such-doc", BOB), 403)["code"] == "index_not_shared"  # says nothing of ids
    service.indices.share("shelf", True, "alice")
    try:
        assert read(base, "shelf", "kakapo", BOB)["passages"] == read(base, "shelf", "kakapo")["passages"]
    finally:
        service.indices.share("shelf", False, "alice")
    missing = error(get(base, "shelf", "kakap"), 404)
    assert (missing["code"], missing["param"]) == ("document_not_found", "id") and "'kakap'" in missing["message"]
    assert error(get(base, "nowhere", "kakapo"), 404)["code"] == "index_not_found"
    assert error(get(base, "no%20such", "kakapo"), 422)["code"] == "invalid_index_name"
    assert error(get(base, "shelf", ""), 422)["param"] == "id"
    service.indices.add("fresh", DocumentsRequest.model_validate(  # queued, not run: no documents yet
        {"documents": [{"id": "ants", "text": "ants farm aphids"}]}), "alice")
    assert error(get(base, "fresh", "ants"), 404)["code"] == "document_not_found"
    assert error(get(base, "fresh", "ants", BOB), 403)["code"] == "index_not_shared"


def test_a_deleted_document_is_not_found_and_a_replaced_one_has_its_new_text_only(app):
    base, service = app
    ingested(service, "scratch", "bob", [{"id": "moth", "text": LONG}, {"id": "wasp", "text": "Wasps build nests."}])
    assert len(read(base, "scratch", "moth", BOB)["passages"]) >= 3
    ingested(service, "scratch", "bob", [{"id": "moth", "title": "Moth", "text": "Moths fly at night."}], replace=True)
    replaced = read(base, "scratch", "moth", BOB)
    assert replaced["title"] == "Moth" and replaced["passages"] == [{"docno": "moth#0", "text": "Moths fly at night."}]
    assert service.indices.delete_documents("scratch", ["wasp"], "bob")["deleted"] == ["wasp"]
    assert error(get(base, "scratch", "wasp", BOB), 404)["code"] == "document_not_found"
    assert read(base, "scratch", "moth", BOB)["title"] == "Moth"
