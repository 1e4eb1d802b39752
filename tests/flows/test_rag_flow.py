"""Language models in flows: usage in the step records on both executors, the built-in rag flow end to end on the
sample index with the embedded model, its command line (text and --json), and ``tessera models``."""

from __future__ import annotations

import json

import pytest

from operators.testing import sample_results


@pytest.mark.slow
def test_usage_lands_in_the_metadata_and_the_step_record(make_executor):
    from flows.spec import FlowSpec

    spec = FlowSpec.parse({"name": "answers", "steps": {
        "context": {"op": "generate.context", "params": {"max_context_length": 200}},
        "answer": {"op": "generate.answer", "params": {"model": "local", "max_tokens": 8}}}})
    result = make_executor().run(spec, sample_results(2, 2))
    used = result.steps["answer"].usage
    assert used["llm_calls"] == 2 and used["prompt_tokens"] > 100 and 0 < used["completion_tokens"] <= 16
    assert used["llm_seconds"] > 0 and result.steps["context"].usage == {}
    for qid in ("q1", "q2"):
        per_query = result.metadata[qid]["usage"]["answer"]
        assert per_query["calls"] == 1 and per_query["model"] == "local"
    assert sum(result.metadata[q]["usage"]["answer"]["prompt_tokens"] for q in ("q1", "q2")) == used["prompt_tokens"]
    assert result.to_dict(rows=False)["steps"]["answer"]["usage"] == used


@pytest.mark.slow
def test_rag_answers_with_numbered_sources(sample_index, run_cli):
    status, out = run_cli("run", "rag", "--index", str(sample_index), "--queries",
                          "which insects make honey and pollinate flowers", "--quiet", "--no-cache")
    assert status == 0 and "answer:" in out and "usage (answer):" in out and "LLM calls, tokens" in out
    status, out = run_cli("run", "rag", "--index", str(sample_index), "--queries",
                          "which insects make honey and pollinate flowers", "--quiet", "--json", "--no-cache")
    result = json.loads(out)
    meta = result["metadata"]["1"]
    assert status == 0 and "degraded" not in meta and meta["answer"].strip()
    assert set(meta["sources"]) <= {row["docno"] for row in result["rows"]}
    assert len(meta["references"]) == len(meta["sources"])
    assert meta["usage"]["answer"]["completion_tokens"] > 0 and result["steps"]["answer"]["usage"]["llm_calls"] == 1
    assert len(result["rows"]) == 5 and {"context", "context_index", "cited", "reference"} <= set(result["rows"][0])


@pytest.mark.slow
def test_rag_multihop_answers_from_rows_of_both_hops(sample_index, run_cli):
    status, out = run_cli("run", "rag_multihop", "--index", str(sample_index),
                          "--queries", "which insects make honey and pollinate flowers", "--quiet", "--json",
                          "--no-cache")
    result = json.loads(out)
    meta = result["metadata"]["1"]
    assert status == 0 and "degraded" not in meta and meta["answer"].strip()
    assert set(meta["sources"]) <= {row["docno"] for row in result["rows"]}
    assert len(result["rows"]) == 5 and all(row["hop"] in (1, 2) for row in result["rows"])


def test_tessera_models_says_what_is_reachable(fault_models, monkeypatch, run_cli):
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.setenv("OLLAMA_API_BASE", fault_models.base)  # the fault server answers /api/tags as Ollama would
    status, out = run_cli("models", "--json")
    rows = {row["alias"]: row for row in json.loads(out)["models"]}
    assert status == 0 and rows["local"]["reachable"] and "SmolLM2" in rows["local"]["why"]
    assert rows["gemma2"]["reachable"] and rows["gemma2"]["model"] == "ollama_chat/gemma2"
    assert not rows["DeepSeekv3"]["reachable"] and "DEEPSEEK_API_KEY" in rows["DeepSeekv3"]["why"]
    assert rows["fault-ok"]["defined_in"].endswith("models.yaml") and fault_models.attempts["ok"] == 0
    monkeypatch.setenv("OLLAMA_API_BASE", "http://127.0.0.1:9")
    status, out = run_cli("models", "gemma2", "fault-ok", "--check")
    assert status == 0 and "no Ollama server answers" in out and "answered in" in out
    assert fault_models.attempts["ok"] == 1
