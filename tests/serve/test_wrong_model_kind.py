"""Over HTTP, a flow whose step names a model of another kind than it loads is the request's mistake: a 422 naming the
field (``steps.<step>.params.model``) and the kind the step loads, nothing queued. Before, a language model's alias
or a bi-encoder for ``rerank.cross_encoder`` was a 404 ``model_not_found`` naming only ``flow``, a bi-encoder for
``rerank.colbert`` a 500 once the step loaded it, and a cross-encoder inside ``retrieve.multi_collection`` went
unchecked. The service's FastAPI app under uvicorn on 127.0.0.1 (no Ray: every refusal comes before a task starts)."""

from __future__ import annotations

import pytest
import requests

from tests.text_checks import TRACEBACK


BM25 = {"op": "retrieve.bm25", "params": {"k": 5}}


@pytest.mark.parametrize("steps, field, code, says", [
    ({"bm25": BM25, "ce": {"op": "rerank.cross_encoder", "params": {"model": "local"}}}, "steps.ce.params.model",
     "wrong_model_kind", ["not a cross-encoder: 'local' names a language model", "this step loads a cross-encoder"]),
    ({"bm25": BM25, "ce": {"op": "rerank.cross_encoder", "params": {"model": "all-MiniLM-L6-v2"}}},
     "steps.ce.params.model", "wrong_model_kind", ["step ce (params.model): not a cross-encoder"]),
    ({"bm25": BM25, "cb": {"op": "rerank.colbert", "params": {"model": "all-MiniLM-L6-v2"}}}, "steps.cb.params.model",
     "wrong_model_kind", ["step cb (params.model): not a ColBERT model"]),
    ({"m": {"op": "retrieve.multi_collection", "params": {
        "collections": [{"name": "a", "index": "news"}],
        "postprocess": [{"op": "rerank.cross_encoder", "params": {"model": "all-MiniLM-L6-v2"}}]}}},
     "steps.m.params.postprocess.0.params.model", "wrong_model_kind",
     ["step m (params.postprocess.0.params.model): not a cross-encoder"]),
    ({"bm25": BM25, "ce": {"op": "rerank.cross_encoder", "params": {"model": {"name": "tessera-cross-encoder"}}}},
     "steps.ce.params.model", "invalid_spec", ["model takes a name, not a mapping: CrossEncoder reference"]),
], ids=["alias-as-cross-encoder", "bi-encoder-as-cross-encoder", "bi-encoder-as-colbert", "nested-cross-encoder",
        "object-as-model"])
def test_a_model_of_another_kind_is_a_422_naming_the_field(base, steps, field, code, says):
    before = requests.get(f"{base}/tasks", timeout=30).json()["tasks"]
    for route in ("/v1/search", "/task/run", "/task/enqueue"):
        answer = requests.post(base + route, json={"flow": {"steps": steps}, "query": "honey bees"}, timeout=120)
        assert answer.status_code == 422, (route, answer.text)
        error = answer.json()["error"]
        assert (error["param"], error["code"]) == (field, code), (route, error)
        for words in says:
            assert words in error["message"], (route, error["message"])
        assert TRACEBACK not in answer.text
    assert requests.get(f"{base}/tasks", timeout=30).json()["tasks"] == before  # nothing was queued
