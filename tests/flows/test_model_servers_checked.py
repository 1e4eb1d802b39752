"""The run's check of a language model's server (``operators.llm.reachable.check_servers_answer``, through
``check_env``, which every run and service request calls): a server that answered is not asked again for a while
(the service asked per request), one that did not is asked again at once; a server of one's own named by
``api_base`` is checked as an Ollama server is, a hosted provider not at all. Real HTTP servers on 127.0.0.1."""

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


def test_a_server_named_by_api_base_is_checked_before_the_run_as_an_ollama_server_is(corpus, tmp_path, monkeypatch,
                                                                                     capsys):
    """A vLLM, llama.cpp or Tessera server named by an alias's api_base was not checked: with it down, the retrieval
    ran and every answer failed after its retries, degraded, exit 0. Now the run is refused in one line naming the
    step, the field and the server; any HTTP answer (401 without a key, 404 for the base URL) counts as up; a
    hosted provider (DeepSeek, at litellm's own address) is not asked."""
    from flows.commands import main
    from operators.llm.aliases import resolve
    from operators.llm.reachable import own_server

    port, nowhere = closed_port(), closed_port()
    models = tmp_path / "models.yaml"
    models.write_text(f"mine: {{model: hosted_vllm/q, api_base: 'http://me:pa55@127.0.0.1:{port}/v1'}}\n"
                      "by_variable: {model: hosted_vllm/q}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    monkeypatch.setenv("TESSERA_OUTBOUND", "server")  # loopback refused to a spec's URLs, not to the alias file's
    spec = tmp_path / "rag_mine.yaml"
    spec.write_text(json.dumps(rag(corpus, "mine")))
    out = tmp_path / "out.jsonl"
    assert main(["run", str(spec), "--queries", "honey bees", "--no-cache", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not out.exists(), err
    assert err == (f"tessera: error: step 'answer', field 'steps.answer.params.model': model 'mine' cannot be reached: "
                   f"no server answers on http://127.0.0.1:{port}/v1 (ConnectionError); start it, or change the "
                   "alias's api_base in its models file; or give the step another model (tessera models says which "
                   "answer)"), err  # (its password left out)
    flow = Flow.load(rag(corpus, "mine")).built
    with CountingServer(port, status=401) as server:
        check_env(flow)
        checked_at_once(flow, 4)
        assert server.asked == {"/v1": 1}
    monkeypatch.setenv("HOSTED_VLLM_API_BASE", f"http://127.0.0.1:{nowhere}/v1")  # litellm's address for hosted_vllm
    with pytest.raises(ModelUnreachableError) as caught:
        check_env(Flow.load(rag(corpus, "by_variable")).built)
    assert caught.value.field == "steps.answer.params.model"
    assert caught.value.why == (f"no server answers on http://127.0.0.1:{nowhere}/v1 (ConnectionError); start it, "
                                "or set $HOSTED_VLLM_API_BASE to where it runs")
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    assert own_server(resolve("DeepSeekv3")) is None and own_server(resolve("openai/gpt-4o-mini")) is None
    check_env(Flow.load(rag(corpus, "DeepSeekv3")).built)  # not asked (without a network, asking would fail)
