"""Over HTTP, a 4xx about a model names it as the request (or the service's config) named it, never by a path of the
server: not the installed package's folder under the virtualenv, not ``$TESSERA_HOME`` or its model repository, not
the working directory. Those paths told any client the server's layout; they stay in the server's log, beside the
request id. ``tessera run`` keeps them (the user's own machine: tests/flows). The service's FastAPI app under
uvicorn on 127.0.0.1 (no Ray: every refusal comes before a task starts)."""

from __future__ import annotations

import logging
import os
import shutil
import sys

import pytest
import requests

from tests.serve.conftest import api_on_localhost

BM25 = {"op": "retrieve.bm25", "params": {"k": 5}}


@pytest.fixture
def served(make_service, tmp_path, monkeypatch):
    """The API over a service whose ``$TESSERA_HOME/models`` holds a bi-encoder (``bi``) and a folder that is no model
    (``empty``), whose models file names a language model by a .gguf that is not there (``gone``), and whose index
    ``enc`` records an encoder by a path: the base URL and the home."""
    from operators.models import resolve_model_path
    from operators.store import Index, IndexSettings

    home = tmp_path / "home"
    shutil.copytree(resolve_model_path("all-MiniLM-L6-v2"), home / "models" / "bi")
    (home / "models" / "empty").mkdir()
    models = tmp_path / "models.yaml"
    models.write_text(f"gone: tessera/{home / 'llm' / 'gone.gguf'}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    make_service()
    Index.create(home / "indices" / "enc", IndexSettings(encoder=str(home / "models" / "bi"), dense=True))
    with api_on_localhost() as url:
        yield url, home


def server_paths(home) -> list[str]:
    """Paths of the server a message must not hold: its home (the model repository is inside), the virtualenv and
    the installed packages, the working directory, the user's home."""
    from operators.models import resolve_model_path

    paths = [str(home), str(home.parent), sys.prefix, str(resolve_model_path("all-MiniLM-L6-v2")), os.getcwd(),
             os.path.expanduser("~")]
    return [path for path in paths if path != os.sep]  # a container's HOME=/ is in every path


def cases(home) -> list[tuple[dict, str, str, list[str]]]:
    """(steps or a whole body, the route, the code, words the message says instead of a path)."""
    ce = {"op": "rerank.cross_encoder"}
    return [
        ({"bm25": BM25, "ce": {**ce, "params": {"model": "all-MiniLM-L6-v2"}}}, "/v1/search", "wrong_model_kind",
         ["not a cross-encoder: 'all-MiniLM-L6-v2' has no sequence-classification head"]),
        ({"bm25": BM25, "cb": {"op": "rerank.colbert", "params": {"model": "all-MiniLM-L6-v2"}}}, "/task/run",
         "wrong_model_kind", ["not a ColBERT model: 'all-MiniLM-L6-v2' is a sentence embedding model"]),
        ({"bm25": BM25, "ce": {**ce, "params": {"model": str(home / "models" / "bi")}}}, "/task/enqueue",
         "wrong_model_kind", ["'bi' for flow flow, step ce (params.model): not a cross-encoder: 'bi' has no"]),
        ({"bm25": BM25, "ce": {**ce, "params": {"model": "no-such-ce"}}}, "/v1/search", "model_not_found",
         ["model 'no-such-ce' is not a packaged model", "a model trained into the model repository "
          "($TESSERA_HOME/models) (it holds bi, empty; tessera train)"]),
        ({"bm25": BM25, "ce": {**ce, "params": {"model": "empty"}}}, "/task/run", "model_not_found",
         ["model folder 'empty' has no config.json or modules.json"]),
        ({"bm25": BM25, "ce": {**ce, "params": {"model": str(home / "models" / "later")}}}, "/task/enqueue",
         "model_not_found", ["'later' for flow flow, step ce (params.model): model path 'later' does not exist"]),
        ({"bm25": BM25, "context": {"op": "generate.context"}, "answer": {"op": "generate.answer",
                                                                        "params": {"model": "gone"}}},
         "/v1/search", "model_not_found", ["'gone.gguf' for flow flow, step answer (params.model): model path "
                                           "'gone.gguf' does not exist"]),
        ({"flow": {"steps": {"dense": {"op": "retrieve.dense", "params": {"k": 5}}},
                   "index_settings": {"encoder": "all-MiniLM-L6-v2"}}, "index": "enc", "query": "honey"},
         "/v1/search", "invalid_spec", ["is made for an index embedded with 'all-MiniLM-L6-v2'",
                                        "searches an index embedded with 'bi'"]),
    ]


def test_a_model_refusal_names_the_model_and_no_server_path_which_the_log_keeps(served, caplog):
    base, home = served
    caplog.set_level(logging.INFO, logger="tessera.serve")
    for number, (steps, route, code, says) in enumerate(cases(home)):
        body = steps if "flow" in steps else {"flow": {"steps": steps}, "query": "honey bees"}
        request_id = f"model-message-{number}"  # as Serve's proxy sets it
        answer = requests.post(base + route, json=body, headers={"X-Request-ID": request_id}, timeout=120)
        assert 400 <= answer.status_code < 500 and answer.json()["error"]["code"] == code, (route, answer.text)
        message = answer.json()["error"]["message"]
        for words in says:
            assert words in message, message
        leaked = [path for path in server_paths(home) if path in answer.text]
        assert not leaked, (leaked, message)
        logged = [record.getMessage() for record in caplog.records if record.name == "tessera.serve"]
        assert any(request_id in line and (str(home) in line or sys.prefix in line) for line in logged), logged
        caplog.clear()


def test_get_flows_says_why_a_saved_flow_does_not_run_without_a_server_path(served):
    base, home = served
    spec = {"steps": {"bm25": BM25, "ce": {"op": "rerank.cross_encoder", "params": {"model": "empty"}}}}
    assert requests.put(f"{base}/flows/mine", json=spec, timeout=60).status_code == 201
    reason = requests.get(f"{base}/flows", timeout=60).json()["status"]["mine"]["reason"]
    assert "model folder 'empty' has no config.json" in reason
    assert not [path for path in server_paths(home) if path in reason], reason
