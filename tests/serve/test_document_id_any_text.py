"""A document's id may hold any text, a newline too, and ``GET /v1/indices/{name}/documents/{id}`` reads it back:
Starlette's ``path`` convertor (``.*``, then ``$``) never matched an id with a newline inside (404 ``no route``) and
read one that ends in a newline as the id without it, another document. Real HTTP on 127.0.0.1 (the service's app
under uvicorn), a real BM25 index; nothing runs on Ray."""

from __future__ import annotations

from urllib.parse import quote

import pyarrow as pa
import requests

from tests.serve.conftest import api_on_localhost, two_document_index

IDS = ["line\nbreak", "ants"]


def test_an_id_with_a_newline_is_read_back_and_no_other_document_answers_for_it(make_service):
    service = make_service()
    two_document_index(service.indices.folder / "notes", doc_id=pa.array(IDS), docno=pa.array([f"{i}#0" for i in IDS]))
    with api_on_localhost() as base:
        for doc_id, text in (("line\nbreak", "honey bees make honey from nectar"),
                             ("ants", "ants farm aphids for honeydew")):
            answer = requests.get(f"{base}/v1/indices/notes/documents/{quote(doc_id, safe='')}", timeout=30)
            assert answer.status_code == 200, answer.text
            assert answer.json()["id"] == doc_id and answer.json()["passages"][0]["text"] == text
        answer = requests.get(f"{base}/v1/indices/notes/documents/ants%0A", timeout=30)  # not the document 'ants'
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "document_not_found", answer.text
        listed = requests.get(f"{base}/v1/indices/notes/documents", timeout=30).json()
        assert [d["id"] for d in listed["documents"]] == IDS
