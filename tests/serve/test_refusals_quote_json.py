"""Every refusal of the service quotes a value as JSON writes it, not only a mosaicRAG body's: a step's ``params``, a
request's ``params`` and an inline ``flow`` of ``/task/run``, ``/task/enqueue``, ``/v1/search`` and ``PUT /flows``
said ``(got ['20'])`` and ``{'a': None}``, Python's repr, to a client that sent ``["20"]`` and ``{"a": null}``. The
same bodies took a number's text written with ``_`` (``"1_0"``, which pydantic reads as Python's ``int()`` does) as 10,
where a mosaicRAG body's was refused: refused too, naming the field. The service's FastAPI app under uvicorn on
127.0.0.1 (no Ray: every body here is refused before a task is queued)."""

from __future__ import annotations

import pytest
import requests


def inline(params: dict) -> dict:
    return {"flow": {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"index": "notes", **params}}}},
            "query": "bees"}


ROUTES = [("post", "/task/run"), ("post", "/task/enqueue"), ("post", "/v1/search")]


@pytest.mark.parametrize("method, path", ROUTES)
@pytest.mark.parametrize("body, param, says", [
    (inline({"k": ["20"]}), "steps.bm25.params.k", 'must be a whole number (got ["20"])'),
    (inline({"k": {"a": None}}), "steps.bm25.params.k", 'must be a whole number (got {"a": null})'),
    (inline({"k": "abc"}), "steps.bm25.params.k", 'must be a whole number (got "abc")'),
    ({"flow": "bm25", "query": "bees", "params": {"bm25.k": ["20"]}}, "steps.bm25.params.k",
     'must be a whole number (got ["20"])'),
    (inline({"k": "1_0"}), "steps.bm25.params.k", 'must be a whole number as JSON writes it, without "_" (got "1_0")'),
    ({"flow": "bm25", "query": "bees", "params": {"bm25.k": "1_0"}}, "steps.bm25.params.k",
     'must be a whole number as JSON writes it, without "_" (got "1_0")'),
    ({**inline({}), "flow": {"steps": {**inline({})["flow"]["steps"], "tf": {
        "op": "rerank.tfidf", "params": {"k1": "1_0.5"}, "inputs": ["bm25"]}}}}, "steps.tf.params.k1",
     'must be a number as JSON writes it, without "_" (got "1_0.5")'),
])
def test_a_refused_value_of_a_tessera_body_is_quoted_as_json(notes_api, method, path, body, param, says):
    answer = requests.request(method, notes_api + path, json=body, timeout=60)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["param"] == param and says in error["message"], error
    assert "'" not in error["message"].split("(got ", 1)[1] and "None" not in error["message"], error


@pytest.mark.parametrize("k, says", [(["20"], 'must be a whole number (got ["20"])'),
                                     ("1_0", 'without "_" (got "1_0")')])
def test_a_saved_flows_refused_value_is_quoted_as_json(notes_api, k, says):
    spec = inline({"k": k})["flow"]
    answer = requests.put(notes_api + "/flows/quoted", json=spec, timeout=60)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["param"] == "steps.bm25.params.k" and says in error["message"], error


def test_a_numbers_text_without_underscore_is_still_read(notes_api):
    answer = requests.post(notes_api + "/v1/search", json={"flow": "bm25", "query": "bees", "index": "notes",
                                                            "params": {"bm25.k": "1"}}, timeout=120)
    assert answer.status_code == 200, answer.text


def test_the_cli_keeps_pythons_quoting_outside_a_request_and_refuses_a_numbers_text_with_underscores_too():
    from flows.spec import FlowSpec
    from operators.errors import SpecError

    with pytest.raises(SpecError) as err:
        FlowSpec.parse(inline({"k": ["20"]})["flow"]).build()
    assert "(got ['20'])" in str(err.value)
    with pytest.raises(SpecError) as err:  # the text "1_0" is refused in a spec as in a request: one rule
        FlowSpec.parse(inline({"k": "1_0"})["flow"]).build()
    assert 'without "_" (got "1_0")' in str(err.value)
    from flows.spec import load_request

    unquoted = load_request("name: x\nsteps:\n  bm25: {op: retrieve.bm25, params: {k: 1_0}}\n")[0]
    assert unquoted.build().operators["bm25"].params.k == 10  # YAML's own number 1_0 is 10 (PyYAML), as written
