"""A language model step whose alias needs a key (``DeepSeekv3``: ``$DEEPSEEK_API_KEY``), and a benchmark whose
reranker's key is unset, are refused before any step runs or any index is built, naming the step and the variable;
a model that needs no key (an Ollama alias, the embedded one, a local server without one) declares nothing, and a
litellm string that is no alias declares its provider's key as litellm names it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.api import Flow
from flows.model_check import MissingEnvError, check_env

CORPUS = [{"_id": "d1", "title": "Bee", "text": "Honey bees make honey from the nectar of flowers."},
          {"_id": "d2", "title": "Opera", "text": "An opera is a drama set to music, composed for singers."}]


@pytest.fixture
def corpus(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TESSERA_MODELS", raising=False)
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(doc) + "\n" for doc in CORPUS))
    return str(path)


def rag(corpus: str, model: str) -> dict:
    return {"name": "rag_key", "steps": {
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": corpus, "k": 2}},
        "context": {"op": "generate.context"},
        "answer": {"op": "generate.answer", "params": {"model": model}}}}


def test_an_alias_with_an_unset_key_is_refused_by_tessera_run_before_any_step(corpus, tmp_path, capsys):
    from flows.commands import main

    spec = tmp_path / "rag_key.yaml"
    spec.write_text(json.dumps(rag(corpus, "DeepSeekv3")))
    out = tmp_path / "out.jsonl"
    assert main(["run", str(spec), "--queries", "honey bees", "--no-cache", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "$DEEPSEEK_API_KEY (step answer, params.model) is not set here, so nothing was run" in err
    assert not out.exists()
    events = []
    flow = Flow.load(rag(corpus, "DeepSeekv3"))
    with pytest.raises(MissingEnvError) as caught:
        flow.run("honey bees", progress=events.append)
    assert (caught.value.step, caught.value.field) == ("answer", "steps.answer.params.model")
    assert events == []  # bm25 did not run


def test_models_that_need_no_key_declare_none_and_a_set_key_passes(corpus, tmp_path, monkeypatch, llm_fault_server):
    for model in ("local", "gemma2", "llama3.1"):  # the embedded model, Ollama aliases
        assert Flow.load(rag(corpus, model)).built.operators["answer"].required_env() == {}
    models = tmp_path / "models.yaml"  # a local server without a key, and one with (a server that answers: one that
    base = llm_fault_server.api_base("ok")  # does not is refused after the keys, ModelUnreachableError)
    models.write_text(f"open_vllm:\n  model: hosted_vllm/qwen\n  api_base: {base}\n"
                      f"keyed_vllm:\n  model: hosted_vllm/qwen\n  api_base: {base}\n"
                      "  api_key_env: TESSERA_TEST_VLLM_KEY\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    monkeypatch.delenv("TESSERA_TEST_VLLM_KEY", raising=False)
    check_env(Flow.load(rag(corpus, "open_vllm")).built)
    keyed = Flow.load(rag(corpus, "keyed_vllm")).built
    with pytest.raises(MissingEnvError, match=r"\$TESSERA_TEST_VLLM_KEY \(step answer, params.model\)"):
        check_env(keyed)
    monkeypatch.setenv("TESSERA_TEST_VLLM_KEY", "k-1")
    check_env(keyed)
    monkeypatch.setenv("DEEPSEEK_API_KEY", "k-2")
    check_env(Flow.load(rag(corpus, "DeepSeekv3")).built)


def test_a_litellm_string_declares_its_providers_key_while_it_is_unset(corpus, monkeypatch):
    """No alias, no table of ours: litellm names each hosted provider's variable."""
    for model, variable in (("openai/gpt-4o-mini", "OPENAI_API_KEY"),
                            ("anthropic/claude-3-5-haiku", "ANTHROPIC_API_KEY")):
        monkeypatch.delenv(variable, raising=False)
        flow = Flow.load(rag(corpus, model)).built
        with pytest.raises(MissingEnvError, match=rf"\${variable} \(step answer, params.model\)"):
            check_env(flow)
        monkeypatch.setenv(variable, "k-3")
        check_env(flow)
    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)  # a setting with a default, not a key
    assert Flow.load(rag(corpus, "ollama_chat/phi3")).built.operators["answer"].required_env() == {}


def test_only_the_models_a_step_calls_declare_their_key(corpus):
    history = {"name": "chat", "steps": {
        "standalone": {"op": "query.contextualize", "params": {"method": "history", "model": "DeepSeekv3"}},
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": corpus, "k": 2}}}}
    check_env(Flow.load(history).built)  # method: history calls no model
    rewritten = {**history, "steps": {**history["steps"], "standalone": {
        "op": "query.contextualize", "params": {"method": "llm", "model": "DeepSeekv3"}}}}
    with pytest.raises(MissingEnvError, match=r"\$DEEPSEEK_API_KEY \(step standalone, params.model\)"):
        check_env(Flow.load(rewritten).built)

    def hops(follow_up: str) -> dict:
        return {"name": "hops", "steps": {"hops": {"op": "retrieve.multi_hop", "params": {
            "index": "wiki", "retriever": "bm25", "follow_up": follow_up, "follow_up_model": "DeepSeekv3"}}}}

    assert Flow.load(hops("titles")).built.operators["hops"].required_env() == {}
    with pytest.raises(MissingEnvError) as caught:
        check_env(Flow.load(hops("llm")).built)
    assert caught.value.field == "steps.hops.params.follow_up_model"
    assert "$DEEPSEEK_API_KEY (step hops, params.follow_up_model)" in caught.value.message


def tiny_dataset(tmp_path: Path, corpus: str) -> Path:
    """A BEIR folder of ``corpus`` with one judged query, for ``tessera bench``."""
    dataset = tmp_path / "tiny"
    (dataset / "qrels").mkdir(parents=True)
    (dataset / "corpus.jsonl").write_text(Path(corpus).read_text())
    (dataset / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "honey bees"}) + "\n")
    (dataset / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return dataset


def test_bench_refuses_an_unset_reranker_key_before_building_any_index(corpus, tmp_path, monkeypatch, capsys):
    from flows.commands import main

    monkeypatch.delenv("TESSERA_TEST_BENCH_KEY", raising=False)
    dataset = tiny_dataset(tmp_path, corpus)
    spec = tmp_path / "reranked.yaml"
    spec.write_text(json.dumps({"name": "reranked", "steps": {
        "bm25": {"op": "retrieve.bm25", "params": {"k": 2}},
        "cohere": {"op": "rerank.api", "params": {"url": "https://api.cohere.com/v2/rerank", "model": "rerank-v3.5",
                                                   "api_key_env": "TESSERA_TEST_BENCH_KEY", "n": 2}}}}))
    indices, out = tmp_path / "indices", tmp_path / "out"
    assert main(["bench", "--dataset", str(dataset), "--flow", "bm25", "--flow", f"api={spec}", "--out", str(out),
                 "--index-dir", str(indices), "--no-mlflow", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "flow api: environment variable $TESSERA_TEST_BENCH_KEY (step cohere, params.api_key_env) is not set" in err
    assert not indices.exists() and not out.exists()


def test_an_openai_server_alias_without_api_key_env_needs_openai_api_key_as_tessera_models_says(
        corpus, tmp_path, monkeypatch, capsys):
    """An ``openai/`` model on a local ``api_base`` with no ``api_key_env``: litellm's OpenAI client will not call it
    without $OPENAI_API_KEY (docs/llm.md), so the run is refused before its retrieval, as `tessera models` says; a
    ``hosted_vllm/`` one needs no key, and `tessera models` asks its server."""
    from flows.commands import main
    from operators.llm.aliases import resolve
    from operators.llm.reachable import reachability

    models = tmp_path / "models.yaml"
    models.write_text("nokey_openai: {model: openai/smollm2, api_base: 'http://127.0.0.1:9/v1'}\n"
                      "nokey_vllm: {model: hosted_vllm/qwen, api_base: 'http://127.0.0.1:9/v1'}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert reachability(resolve("nokey_openai")) == (False, "set OPENAI_API_KEY: litellm's client sends a key even to "
                                                     "http://127.0.0.1:9/v1 (any value, where that server checks "
                                                     "none), or give the alias an api_key_env")
    spec = tmp_path / "rag_key.yaml"
    spec.write_text(json.dumps(rag(corpus, "nokey_openai")))
    assert main(["run", str(spec), "--queries", "honey bees", "--no-cache"]) == 2
    err = capsys.readouterr().err.strip()
    assert "$OPENAI_API_KEY (step answer, params.model) is not set here, so nothing was run" in err
    from operators.llm.reachable import ModelUnreachableError

    monkeypatch.setenv("OPENAI_API_KEY", "sk-local")  # the key passes; the server, asked next, does not answer
    with pytest.raises(ModelUnreachableError, match=r"no server answers on http://127.0.0.1:9/v1"):
        check_env(Flow.load(rag(corpus, "nokey_openai")).built)
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(ModelUnreachableError, match=r"no server answers on http://127.0.0.1:9/v1"):
        check_env(Flow.load(rag(corpus, "nokey_vllm")).built)
    reachable, why = reachability(resolve("nokey_vllm"))
    assert not reachable and why == ("no server answers on http://127.0.0.1:9/v1 (ConnectionError); start it, or "
                                     "change the alias's api_base in its models file")


def test_a_model_on_an_ollama_server_that_does_not_answer_is_refused_before_any_step(corpus, tmp_path, monkeypatch,
                                                                                      capsys, llm_fault_server):
    """``tessera run``, ``tessera bench`` and ``Flow.run`` with ``gemma2`` and no Ollama running ran the retrieval,
    then each query's answer failed after its retries ("connection refused"), the run ending with degraded answers
    and exit 0. ``tessera chat`` alone refused it (tests/flows/test_chat_command.py)."""
    from flows.commands import main
    from operators.llm.testing import closed_port

    monkeypatch.setenv("OLLAMA_API_BASE", f"http://127.0.0.1:{closed_port()}")
    spec = tmp_path / "rag_ollama.yaml"
    spec.write_text(json.dumps(rag(corpus, "gemma2")))
    out = tmp_path / "out.jsonl"
    assert main(["run", str(spec), "--queries", "honey bees", "--no-cache", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not out.exists(), err
    assert "step 'answer', field 'steps.answer.params.model': model 'gemma2' cannot be reached: no Ollama server " \
           "answers on http://127.0.0.1:" in err and "or give the step another model" in err, err
    indices, bench_out = tmp_path / "indices", tmp_path / "bench"
    assert main(["bench", "--dataset", str(tiny_dataset(tmp_path, corpus)), "--flow", "bm25", "--flow",
                 f"rag={spec}", "--out", str(bench_out), "--index-dir", str(indices), "--no-mlflow", "--quiet"]) == 2
    assert "model 'gemma2' cannot be reached" in capsys.readouterr().err
    assert not indices.exists() and not bench_out.exists()
    from operators.llm.reachable import ModelUnreachableError

    events = []
    with pytest.raises(ModelUnreachableError) as caught:
        Flow.load(rag(corpus, "gemma2")).run("honey bees", progress=events.append)
    assert (caught.value.step, caught.value.field) == ("answer", "steps.answer.params.model") and events == []
    history = {"name": "chat", "steps": {"standalone": {"op": "query.contextualize", "params": {
        "method": "history", "model": "gemma2"}}, "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": corpus}}}}
    check_env(Flow.load(history).built)  # a step that calls no model asks no server
    monkeypatch.setenv("OLLAMA_API_BASE", llm_fault_server.base)  # answers GET /api/tags as Ollama does
    check_env(Flow.load(rag(corpus, "gemma2")).built)
