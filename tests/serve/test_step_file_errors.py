"""A step that finds, once it runs, that a file its params name cannot be used (``retrieve.corpus_bm25``'s corpus that
does not exist, a folder, a file that is not JSONL) refused the request's own value: a 422 ``flow_not_runnable``
naming ``steps.<id>.params.<param>``, for a search and for a chat with a saved flow, not the 500 of a failure of the
server. A failure that names no param of the spec (a model's, a bug) stays a 500. The API on uvicorn beside a real
``Service`` and the chat's own functions (its route is the Ray ingress's); the files are the checkout's ``data/``."""

from __future__ import annotations

import pytest
import requests

from operators.errors import OperatorError
from serve.chat import chat, chat_flows
from serve.http.errors import ApiError

CORPUS = "steps.m.params.corpus"


def corpus_flow(corpus: str, **steps: dict) -> dict:
    return {"steps": {"m": {"op": "retrieve.corpus_bm25", "params": {"corpus": corpus}}, **steps}}


def search(base: str, flow: dict) -> requests.Response:
    return requests.post(f"{base}/v1/search", json={"query": "honey bees", "flow": flow}, timeout=120)


@pytest.mark.parametrize("corpus, says", [
    ("data/nope.jsonl", "corpus file not found: nope.jsonl"),
    ("data/sample", "corpus sample is a folder, not a JSONL file"),  # a folder (it said "not found")
    ("data/sample/README.md", "README.md, line 1: not valid JSON"),  # read by the step's own JSONL source
])
def test_a_corpus_the_step_cannot_use_is_a_422_naming_its_param(base, repo_root, corpus, says):
    refused = search(base, corpus_flow(corpus))
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["param"], error["code"], error["type"]) == (CORPUS, "flow_not_runnable", "invalid_request_error")
    assert says in error["message"] and "step 'm'" in error["message"], error["message"]
    assert str(repo_root) not in error["message"]  # the server's paths, as a run's failure is worded


def test_a_corpus_that_is_there_is_searched(base):
    found = search(base, corpus_flow("data/sample/corpus.jsonl"))
    assert found.status_code == 200, found.text
    assert found.json()["results"][0]["hits"]


def test_a_saved_chat_flow_with_a_missing_corpus_is_a_422_naming_its_param(base):
    """Saved as ``brokenrag``, a flow that answers from a corpus that is not there: its chat was a 500 ``flow_error``
    (OpenAI's and Cohere's bodies run it through ``run_flow`` alike)."""
    spec = corpus_flow("data/nope.jsonl", context={"op": "generate.context", "inputs": ["m"]},
                       answer={"op": "generate.answer", "inputs": ["context"]})
    assert requests.put(f"{base}/flows/brokenrag", json=spec, timeout=30).status_code == 201
    request = chat.ChatRequest(model="brokenrag", messages=[{"role": "user", "content": "which insects make honey?"}])
    with pytest.raises(ApiError) as err:  # refused as the chat's flow is prepared, before anything runs
        prepared, table = chat_flows.prepare_flow(chat_flows.find_flow("brokenrag", "local"), request, "local")
        chat_flows.run_flow(prepared, table)
    assert (err.value.status, err.value.param, err.value.code) == (422, CORPUS, "flow_not_runnable")
    assert "corpus file not found: nope.jsonl" in err.value.message


@pytest.mark.parametrize("failure", [
    OperatorError("the model's replica died", op="retrieve.corpus_bm25", step="m"),  # names no param
    OperatorError("a nested step's param", op="sources.jsonl", step="m", field="params.path"),  # not the spec's
    RuntimeError("a bug"),
])
def test_a_failure_that_names_no_param_of_the_spec_stays_a_500(base, monkeypatch, failure):
    from operators.retrieve.corpus_bm25 import CorpusBM25Retriever

    def fail(self):
        raise failure

    monkeypatch.setattr(CorpusBM25Retriever, "setup", fail)
    answer = search(base, corpus_flow("data/sample/corpus.jsonl"))
    assert answer.status_code == 500 and answer.json()["error"]["code"] == "internal_error", answer.text
