"""A query rewriter (``query.expand``) placed after a retriever in a flow a client sends reads a table of hits, where
each qid appears many times: the step refused it with an ``OperatorError``, which ``/v1/search`` answered as a 500
("the details are in the server log"). It is the spec's mistake, so now a 422 naming the step and saying
where the step goes. Over real HTTP (the service's app under uvicorn on 127.0.0.1) on a real BM25 index."""

from __future__ import annotations

import pytest
import requests

from tests.serve.conftest import two_document_index

pytestmark = pytest.mark.integration  # the service's app in this process


def test_a_rewriter_after_the_retriever_is_a_422_naming_it(make_service):
    from tests.serve.conftest import api_on_localhost

    service = make_service()
    two_document_index(service.indices.folder / "real")
    flow = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}, "x": {"op": "query.expand"}}}
    with api_on_localhost() as base:
        response = requests.post(f"{base}/v1/search", json={"flow": flow, "query": "honey ants", "index": "real"},
                                 timeout=120)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert "step 'x'" in error["message"] and "before the retrievers" in error["message"], error
