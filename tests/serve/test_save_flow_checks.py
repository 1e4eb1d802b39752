"""Over HTTP, ``PUT /flows/{name}`` refuses what a run of the flow refuses from its spec alone, with the run's 422:
a model of another kind than its step loads (also inside ``retrieve.multi_collection``) and what the spec guard
refuses (the server's keys, a litellm model string, a model path outside the model repository); a step without its
input columns: tests/serve/test_task_flow_not_runnable.py. Before, such a flow was saved (201) and refused only when
run. A model not made yet, or an index not made yet, is saved as before. The service's FastAPI app under
uvicorn on 127.0.0.1 (no Ray: nothing runs)."""

from __future__ import annotations

import pytest
import requests

from tests.serve.conftest import api_on_localhost
from tests.text_checks import TRACEBACK

BM25 = {"op": "retrieve.bm25", "params": {"k": 5}}
CONTEXT = {"op": "generate.context"}


@pytest.fixture
def base(make_service, monkeypatch):
    monkeypatch.delenv("TESSERA_ALLOW_ENV", raising=False)
    make_service()
    with api_on_localhost() as url:
        yield url


@pytest.mark.parametrize("steps, field, code", [
    ({"bm25": BM25, "ce": {"op": "rerank.cross_encoder", "params": {"model": "all-MiniLM-L6-v2"}}},
     "steps.ce.params.model", "wrong_model_kind"),
    ({"bm25": BM25, "ce": {"op": "rerank.cross_encoder", "params": {"model": "local"}}},
     "steps.ce.params.model", "wrong_model_kind"),
    ({"m": {"op": "retrieve.multi_collection", "params": {
        "collections": [{"name": "a", "index": "news"}],
        "postprocess": [{"op": "rerank.colbert", "params": {"model": "all-MiniLM-L6-v2"}}]}}},
     "steps.m.params.postprocess.0.params.model", "wrong_model_kind"),
    ({"bm25": BM25, "r": {"op": "rerank.api", "params": {"url": "https://rerank.example.com/v1/rerank",
                                                         "api_key_env": "TESSERA_API_KEYS"}}},
     "steps.r.params.api_key_env", "env_not_allowed"),
    pytest.param({"bm25": BM25, "context": CONTEXT, "answer": {"op": "generate.answer",
                                                               "params": {"model": "ollama_chat/phi3"}}},
                 "steps.answer.params.model", "model_not_allowed", marks=pytest.mark.slow),  # imports litellm: 5 s
    ({"bm25": BM25, "r": {"op": "rerank.embedding", "params": {"model": "/etc"}}},
     "steps.r.params.model", "model_not_allowed"),
], ids=["bi-encoder-as-cross-encoder", "alias-as-cross-encoder", "nested-bi-encoder-as-colbert", "server-keys",
        "litellm-string", "model-path"])
def test_saving_refuses_what_running_refuses_from_the_spec_with_the_same_422(base, steps, field, code):
    saved = requests.put(f"{base}/flows/mine", json={"steps": steps}, timeout=60)
    run = requests.post(f"{base}/v1/search", json={"flow": {"name": "mine", "steps": steps}, "query": "honey"},
                        timeout=60)
    assert (run.status_code, run.json()["error"]["code"], run.json()["error"]["param"]) == (422, code, field), run.text
    assert (saved.status_code, saved.json()) == (422, run.json())
    assert TRACEBACK not in saved.text
    assert requests.get(f"{base}/flows", timeout=60).json()["saved"] == []  # nothing was written


def test_a_flow_whose_model_is_not_made_yet_is_saved_and_said_not_runnable(base):
    """docs/serving.md: a saved flow may wait for ``tessera train``; ``GET /flows`` gives its run's refusal."""
    steps = {"bm25": BM25, "ce": {"op": "rerank.cross_encoder", "params": {"model": "tessera-cross-encoder"}}}
    assert requests.put(f"{base}/flows/later", json={"steps": steps}, timeout=60).status_code == 201
    status = requests.get(f"{base}/flows", timeout=60).json()["status"]["later"]
    run = requests.post(f"{base}/v1/search", json={"flow": "later", "query": "honey"}, timeout=60)
    assert (run.status_code, run.json()["error"]["code"]) == (404, "model_not_found")
    assert status == {"runnable": False, "reason": run.json()["error"]["message"]}


def test_a_flow_whose_index_is_not_made_yet_is_saved_and_said_not_runnable(base):
    """The index may come later (an upload): the column check needs none, and a missing one is left to the run;
    ``GET /flows`` gives that run's refusal (the web UI lists the flow as one that cannot run here)."""
    steps = {"bm25": {"op": "retrieve.bm25", "params": {"k": 5, "index": "comes_later"}}}
    assert requests.put(f"{base}/flows/later", json={"steps": steps}, timeout=60).status_code == 201
    run = requests.post(f"{base}/v1/search", json={"flow": "later", "query": "honey"}, timeout=60)
    assert run.status_code == 422 and "comes_later" in run.json()["error"]["message"], run.text
    status = requests.get(f"{base}/flows", timeout=60).json()["status"]["later"]  # listed as runnable before
    assert status == {"runnable": False, "reason": run.json()["error"]["message"]}, status


@pytest.mark.parametrize("text", [b"steps: [unclosed\n", b"\xff\xfe\x00not text", b"just a string\n",
                                  b"steps:\n  b: {op: retrieve.nope}\n",
                                  b"steps:\n  b: {op: retrieve.bm25, params: {k: x}}\n"])
def test_a_saved_flows_file_that_does_not_read_is_said_not_runnable_as_its_run_refuses_it(base, tmp_path, text):
    """A flow file saved by hand (or by another version) that is no spec: ``GET /flows`` gave its reason with the
    file's whole path under $TESSERA_HOME (the server's layout, to any key), where its run's 422 names the file
    alone; the status's reason is the run's message, word for word."""
    from flows import store as flow_store

    flow_store.flows_dir().mkdir(parents=True, exist_ok=True)
    (flow_store.flows_dir() / "handmade.yaml").write_bytes(text)
    run = requests.post(f"{base}/v1/search", json={"flow": "handmade", "query": "honey"}, timeout=60)
    assert run.status_code == 422, run.text
    status = requests.get(f"{base}/flows", timeout=60).json()["status"]["handmade"]
    assert status == {"runnable": False, "reason": run.json()["error"]["message"]}, status
    assert str(tmp_path) not in status["reason"]
