"""The service runs a reranker whose API reads its key from a header other than ``Authorization: Bearer``
(``rerank.api``'s ``api_key_header``, the key from the variable ``api_key_env`` names, one ``TESSERA_ALLOW_ENV``
lists): the flow saves (``PUT /flows/{name}``) and a search with it is reranked by a real server on 127.0.0.1 that
scores a request only when ``X-Api-Key`` holds the key. Before, a key reached the API as ``Authorization: Bearer``
only (the spec naming the header was refused), and putting it in ``user_headers`` is refused as a key in the spec.
The service's FastAPI app under uvicorn on 127.0.0.1, a real BM25 index (no Ray: a search runs in-process)."""

from __future__ import annotations

from pathlib import Path

import requests

from operators.testing import JsonHandler, local_http_server
from tests.serve.conftest import api_on_localhost, two_document_index

KEY = "sk-x-api-key-7c3d90e1f2ab"


class XApiKeyReranker(JsonHandler):
    """Cohere's answer, the documents scored in reverse order, once ``X-Api-Key`` holds the key; a 401 else."""

    seen: list[dict[str, str]] = []

    def do_POST(self) -> None:  # noqa: N802  (http.server's naming)
        body = self.read_json()
        XApiKeyReranker.seen.append(dict(self.headers))
        if self.headers.get("X-Api-Key") == KEY and "Authorization" not in self.headers:
            self.answer_json(200, {"results": [{"index": i, "relevance_score": float(i)}
                                               for i in range(len(body["documents"]))]})
        else:
            self.answer_json(401, {"message": "no valid key in X-Api-Key"})


def test_a_search_sends_the_key_in_the_header_the_api_reads(make_service, monkeypatch):
    monkeypatch.setenv("RERANK_KEY", KEY)
    monkeypatch.setenv("TESSERA_ALLOW_ENV", "RERANK_KEY")
    monkeypatch.setenv("TESSERA_ALLOW_HOSTS", "loopback")  # the reranker below (the service allows public only)
    monkeypatch.setenv("TESSERA_OUTBOUND", "server")
    service = make_service()
    two_document_index(Path(service.home) / "indices" / "docs")
    XApiKeyReranker.seen = []
    with local_http_server(XApiKeyReranker) as reranker, api_on_localhost() as base:
        rerank = {"op": "rerank.api", "params": {"url": f"{reranker}/v1/rerank", "api_key_env": "RERANK_KEY",
                                                 "api_key_header": "X-Api-Key", "on_error": "error"}}
        spec = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 2}}, "rr": rerank}}
        saved = requests.put(f"{base}/flows/keyed", json=spec, timeout=60)
        assert saved.status_code == 201, saved.text
        assert requests.get(f"{base}/flows/keyed", timeout=30).json()["steps"]["rr"]["params"]["api_key_header"] \
            == "X-Api-Key"
        search = {"flow": "keyed", "query": "honey ants", "index": "docs"}
        answer = requests.post(f"{base}/v1/search", json=search, timeout=60)
        assert answer.status_code == 200, answer.text
        hits = answer.json()["results"][0]["hits"]
        assert [(hit["docno"], hit["rank_bm25"]) for hit in hits] == [("bees#0", 2), ("ants#0", 1)]  # the server's
        assert [headers.get("X-Api-Key") for headers in XApiKeyReranker.seen] == [KEY]
        assert KEY not in answer.text + saved.text
