"""A mosaicRAG body's refusal on ``/task/run`` and ``/task/enqueue`` names the field as the client wrote it
(``2.parameters.k1``; ``parameters.k`` for the top-level ``parameters`` that step 1 takes), not the flow Tessera made
of it (``steps.2.params.k1``), and quotes a value as it was sent: ``"Yes"`` for a number was read as true first and
said ``(got True)``, and as JSON writes it (``(got ["20"])``, not Python's ``['20']``). A step that is not an object
is said to be that, not to lack an ``id``. A number written with ``_`` (``"1_0"``, which Python's and pydantic's
readers take as 10) is refused naming its field, as JSON has no such number. The service's FastAPI
app under uvicorn on 127.0.0.1 (no Ray: every body here is refused before a task is queued)."""

from __future__ import annotations

import pytest
import requests

BM25 = {"id": "bm25", "parameters": {"k": 5}}


@pytest.mark.parametrize("path", ["/task/run", "/task/enqueue"])
@pytest.mark.parametrize("body, param, says", [
    ({"1": BM25, "2": {"id": "rerank.tfidf", "parameters": {"k1": "Yes"}}}, "2.parameters.k1", '(got "Yes")'),
    ({"parameters": {"k": "Yes"}, "1": {"id": "bm25"}}, "parameters.k", '(got "Yes")'),
    ({"1": {"id": "bm25", "parameters": {"k": ["20"]}}}, "1.parameters.k", 'must be a whole number (got ["20"])'),
    ({"1": BM25, "2": {"id": "rerank.tfidf", "parameters": {"k1": {"a": None}}}}, "2.parameters.k1",
     'must be a number (got {"a": null})'),
    ({"1": {"id": "bm25", "parameters": {"k": "1_0"}}}, "1.parameters.k",
     'must be a whole number as JSON writes it, without "_" (got "1_0")'),
    ({"parameters": {"k": "1_000"}, "1": {"id": "bm25"}}, "parameters.k",
     'must be a whole number as JSON writes it, without "_" (got "1_000")'),
    ({"1": BM25, "2": {"id": "rerank.tfidf", "parameters": {"k1": "1_0.5"}}}, "2.parameters.k1",
     'must be a number as JSON writes it, without "_" (got "1_0.5")'),
    ({"1": BM25, "3": BM25}, "steps", 'steps must be numbered 1..n without gaps, got ["1", "3"]'),
    ({"1": BM25, "extra": 1}, "extra", 'unknown field(s) ["extra"] in a mosaicRAG request'),
    ({"1": {**BM25, "params": {}}}, "1.params", 'unknown field(s) ["params"]'),
    ({"1": {"id": "bm25", "parameters": {"kk": 1}}}, "1.parameters.kk", "unknown parameter; did you mean 'k'?"),
    ({"1": "bm25"}, "1", "a step must be an object with the operator's 'id' and its 'parameters', not a string"),
])
def test_a_mosaic_body_is_refused_naming_its_own_field(notes_api, path, body, param, says):
    answer = requests.post(notes_api + path, json={"query": "bees", **body}, timeout=60)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == (param, "invalid_spec") and says in error["message"], error
    assert "steps." not in error["message"] and "True" not in error["message"], error


def test_yes_and_no_are_true_and_false_for_a_param_that_takes_them_only():
    from flows.spec import from_mosaic

    spec, _ = from_mosaic({"query": "q", "1": {"id": "bm25", "parameters": {"k": "20"}},
                           "2": {"id": "rerank.tfidf", "parameters": {"lowercase": "No", "k1": "Yes"}}})
    assert spec.steps["2"].params == {"lowercase": False, "k1": "Yes"}
