"""A request's ``params`` (``{"STEP.PARAM": value}``, as ``tessera run --set``) set a flow's step params for that
request, checked as the flow's own params are: a step the flow lacks, a param its operator lacks or the guard's
rules are 422s naming the field. A real BM25 index, through the FastAPI app on uvicorn, without Ray."""

from __future__ import annotations

import pytest
import requests

FLOW = {"steps": {"b": {"op": "retrieve.bm25", "params": {"k": 5}}}}
#: A flow with a step whose params the service guards (serve/security/spec_guard.py); it is refused before it runs.
GUARDED = {"steps": {**FLOW["steps"], "tfidf": {"op": "rerank.tfidf", "inputs": ["b"]}}}


def search(base: str, flow: dict = FLOW, **body) -> requests.Response:
    return requests.post(base + "/v1/search", json={"flow": flow, "query": "honey ants", "index": "notes", **body},
                         timeout=60)


def test_params_set_a_step_param_for_the_request_only(notes_api):
    both = search(notes_api)
    assert both.status_code == 200, both.text
    assert {hit["doc_id"] for hit in both.json()["results"][0]["hits"]} == {"bees", "ants"}
    one = search(notes_api, params={"b.filter": {"field": "doc_id", "eq": "ants"}})
    assert one.status_code == 200, one.text
    assert [hit["doc_id"] for hit in one.json()["results"][0]["hits"]] == ["ants"]
    again = search(notes_api)  # the flow itself is unchanged
    assert {hit["doc_id"] for hit in again.json()["results"][0]["hits"]} == {"bees", "ants"}


@pytest.mark.parametrize("params, param, says", [
    ({"bb.k": 3}, "params", "flow 'flow' has no step 'bb' (did you mean 'b'?); its steps: b, tfidf"),
    ({"k": 3}, "params", "a setting is named STEP.PARAM ('dense.k'); got 'k'"),
    ({"b.kk": 3}, "steps.b.params.kk", "unknown parameter; did you mean 'k'?"),
    ({"tfidf.token_pattern": r"(\w+\s?)+$"}, "steps.tfidf.params.token_pattern", "token_pattern"),
])
def test_a_setting_the_flow_refuses_is_a_422_naming_its_field(notes_api, params, param, says):
    answer = search(notes_api, GUARDED, params=params)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["param"] == param and says in error["message"], error


def test_params_that_are_no_object_are_a_422(notes_api):
    answer = search(notes_api, params=["b.k=3"])
    assert answer.status_code == 422 and answer.json()["error"]["param"] == "params", answer.text
