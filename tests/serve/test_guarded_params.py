"""Params a flow from the network may not set (serve/security/spec_guard.py). It runs no regular expression of its own
(``rerank.tfidf``'s ``token_pattern``): Python's ``re`` has no timeout and holds the GIL while it backtracks, so
``(\\w+\\s?)+$`` over a query of a few dozen words held the service's whole process, every other request and its
health check included. A 422 naming the field; the default, also when written out, runs. Nor does it take a torch
``device``. Through the FastAPI app on uvicorn, without Ray."""

from __future__ import annotations

import pytest
import requests

DEFAULT = r"(?u)\b\w\w+\b"


def flow(pattern: str) -> dict:
    return {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 5}},
                      "tfidf": {"op": "rerank.tfidf", "params": {"token_pattern": pattern}, "inputs": ["bm25"]}}}


@pytest.mark.parametrize("pattern", [r"(\w+\s?)+$", r"\w+"])
def test_a_pattern_of_the_request_is_a_422_naming_it(notes_api, pattern):
    answer = requests.post(notes_api + "/v1/search", json={"flow": flow(pattern), "query": "bees", "index": "notes"},
                           timeout=60)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == ("steps.tfidf.params.token_pattern", "pattern_not_allowed")
    saved = requests.put(notes_api + "/flows/tokens", json=flow(pattern), timeout=60)
    assert saved.status_code == 422 and saved.json()["error"]["code"] == "pattern_not_allowed", saved.text


@pytest.mark.slow  # scikit-learn's import: 3-4 s
def test_the_default_pattern_runs(notes_api):
    answer = requests.post(notes_api + "/v1/search", json={"flow": flow(DEFAULT), "query": "bees", "index": "notes"},
                           timeout=60)
    assert answer.status_code == 200, answer.text
    assert [hit["doc_id"] for hit in answer.json()["results"][0]["hits"]][:1] == ["bees"]


def test_a_device_of_the_request_is_a_422_naming_it(notes_api):
    """``analyze.sentiment`` with ``device: cuda:7`` failed its setup on a machine without that GPU: a 500."""
    steps = {"bm25": {"op": "retrieve.bm25", "params": {"k": 5}},
             "mood": {"op": "analyze.sentiment", "params": {"device": "cuda:7"}, "inputs": ["bm25"]}}
    answer = requests.post(notes_api + "/v1/search", json={"flow": {"steps": steps}, "query": "bees", "index": "notes"},
                           timeout=60)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == ("steps.mood.params.device", "device_not_allowed")
