"""The run's check of a language model's server (``operators.llm.reachable.check_servers_answer``, through
``check_env``, which every run and service request calls): a server that answered is not asked again for a while
(the service asked per request), one that did not is asked again at once. Real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import json
import threading

import pytest

from flows.api import Flow
from flows.model_check import check_env
from operators.llm.reachable import ModelUnreachableError
from operators.llm.testing import CountingServer, closed_port

CORPUS = [{"_id": "d1", "title": "Bee", "text": "Honey bees make honey from the nectar of flowers."}]


@pytest.fixture
def corpus(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TESSERA_MODELS", raising=False)
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(doc) + "\n" for doc in CORPUS))
    return str(path)


def rag(corpus: str, model: str) -> dict:
    return {"name": "rag_server", "steps": {
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": corpus, "k": 1}},
        "context": {"op": "generate.context"},
        "answer": {"op": "generate.answer", "params": {"model": model}}}}


def checked_at_once(flow, times: int) -> None:
    """``check_env(flow)`` on ``times`` threads at once, as the service's request threads check their flows."""
    failed = []

    def check() -> None:
        try:
            check_env(flow)
        except Exception as err:  # noqa: BLE001  (said by the assertion below)
            failed.append(err)

    threads = [threading.Thread(target=check) for _ in range(times)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert failed == []


def test_an_ollama_server_that_answered_is_not_asked_again_and_one_that_did_not_is(corpus, monkeypatch):
    """Every run and every service request asked the Ollama server (``GET /api/tags``) again: 10 checks, 10 probes.
    A server that did not answer is asked again by the next check, so one that comes up is seen at once."""
    from operators.llm import reachable

    port = closed_port()
    monkeypatch.setenv("OLLAMA_API_BASE", f"http://127.0.0.1:{port}")
    flow = Flow.load(rag(corpus, "gemma2")).built
    with pytest.raises(ModelUnreachableError, match=f"no Ollama server answers on http://127.0.0.1:{port} "):
        check_env(flow)  # nothing listens yet
    with CountingServer(port) as server:
        check_env(flow)  # it came up: seen at once, not the failure remembered
        check_env(flow)
        checked_at_once(flow, 8)
        assert server.asked == {"/api/tags": 1}
        monkeypatch.setattr(reachable, "ANSWERED_FOR_S", 0.0)  # its answer too old: asked again
        check_env(flow)
        assert server.asked == {"/api/tags": 2}
