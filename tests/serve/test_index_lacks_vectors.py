"""A flow that searches an index by what it was built without (vectors) is a 422 naming the step's index, before
anything runs, as `tessera run` refuses it. Through the FastAPI app on uvicorn, without Ray."""

from __future__ import annotations

import requests


def test_a_dense_search_of_an_index_without_vectors_is_a_422_naming_the_step(notes_api):
    answer = requests.post(notes_api + "/v1/search", json={"flow": "hybrid", "query": "bees", "index": "notes"},
                           timeout=60)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["param"] == "steps.dense.params.index" and "built without vectors" in error["message"], error
    kept = requests.post(notes_api + "/v1/search", json={"flow": "bm25", "query": "bees", "index": "notes"},
                         timeout=60)
    assert kept.status_code == 200 and kept.json()["results"][0]["hits"][0]["doc_id"] == "bees", kept.text
