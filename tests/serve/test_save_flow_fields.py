"""``PUT /flows/{name}`` names a step's field by its path in the body, as ``/v1/search`` names the same inline spec's:
``steps.b.op``, ``steps.b.inputs`` (it said ``op`` and ``inputs``, of no step). The service's FastAPI app under
uvicorn on 127.0.0.1 (no Ray: nothing runs)."""

from __future__ import annotations

import pytest
import requests

BM25 = {"op": "retrieve.bm25", "params": {"k": 5}}


@pytest.mark.parametrize("step, param, says", [
    ({"op": "nope.x", "inputs": ["a"]}, "steps.b.op", "unknown operator 'nope.x'"),
    ({"op": "rerank.tfidf", "inputs": ["zz"]}, "steps.b.inputs", "input 'zz' is not a step of this flow"),
    ({"op": "rerank.tfidf", "inputs": ["b"]}, "steps.b.inputs", "cannot read its own output"),
])
def test_a_step_field_is_named_by_its_path_in_the_body(notes_api, step, param, says):
    spec = {"steps": {"a": BM25, "b": step}}
    saved = requests.put(notes_api + "/flows/mine", json=spec, timeout=60)
    searched = requests.post(notes_api + "/v1/search", json={"flow": spec, "query": "bees", "index": "notes"},
                             timeout=60)
    for answer in (saved, searched):
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert (error["param"], error["code"]) == (param, "invalid_spec") and says in error["message"], error

