"""Language models in flows: usage in the step records on both executors, the built-in rag flow end to end on the
sample index with the embedded model, its command line (text and --json), and ``tessera models``."""

from __future__ import annotations

import json
import os
from pathlib import Path

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
    assert rows["fault-ok"]["reachable"] and rows["fault-ok"]["why"] == f"a server answers on {fault_models.base}/ok/v1"
    assert not rows["fault-error"]["reachable"] and rows["fault-error"]["why"].endswith("answers HTTP 500")
    monkeypatch.delenv("TESSERA_FAULT_KEY")
    status, out = run_cli("models", "fault-ok", "--json")
    assert json.loads(out)["models"][0]["why"] == "$TESSERA_FAULT_KEY is not set"
    monkeypatch.setenv("TESSERA_FAULT_KEY", "any")
    models = Path(os.environ["TESSERA_MODELS"])
    keyless = f"keyless: {{model: hosted_vllm/x, api_base: '{fault_models.base}/ok/v1'}}\n"
    models.write_text(models.read_text() + keyless)
    status, out = run_cli("models", "keyless", "--json")
    assert json.loads(out)["models"][0]["why"] == f"the server at {fault_models.base}/ok/v1 refuses a call without " \
                                                  "a key (HTTP 401)"
    monkeypatch.setenv("OLLAMA_API_BASE", "http://127.0.0.1:9")
    status, out = run_cli("models", "gemma2", "fault-ok", "--check")
    assert status == 0 and "no Ollama server answers" in out and "answered in" in out
    assert fault_models.attempts["ok"] == 1


CORPUS = [{"_id": "d1", "title": "Bee", "text": "Honey bees make honey from the nectar of flowers."},
          {"_id": "d2", "title": "Opera", "text": "An opera is a drama set to music, composed for singers."}]


def answer_spec(tmp_path, model: str, **answer: object) -> str:
    """A spec file: BM25 over a two-document corpus, numbered context, an answer from ``model``."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(doc) + "\n" for doc in CORPUS))
    spec = tmp_path / "answer.yaml"
    spec.write_text(json.dumps({"name": "answer", "steps": {
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(corpus), "k": 2}},
        "context": {"op": "generate.context"},
        "answer": {"op": "generate.answer", "params": {"model": model, **answer}},
        "references": {"op": "generate.references"}}}))
    return str(spec)


def test_a_model_that_cannot_be_reached_is_named_where_it_failed(tmp_path, monkeypatch, run_cli):
    """The degraded reason and `tessera models --check` name the alias, its litellm model and its server. A server
    that does not answer is refused before the run (tests/flows/test_llm_env.py, test_model_servers_checked.py);
    one that answered that check and stopped before the call (the check believes an answer for a while) is named
    at the call."""
    from flows.api import Flow
    from flows.model_check import check_env
    from operators.llm.testing import CountingServer, closed_port

    port = closed_port()  # nothing listens on it
    models = tmp_path / "models.yaml"
    models.write_text(f"gone: {{model: ollama_chat/gemma2, api_base: 'http://127.0.0.1:{port}'}}\n"
                      f"gone_api: {{model: openai/x, api_base: 'http://127.0.0.1:{port}/v1', api_key_env: GONE_KEY}}\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    monkeypatch.setenv("GONE_KEY", "sk-gone-secret")
    for gone in ("gone", "gone_api"):
        assert run_cli("run", answer_spec(tmp_path, gone, num_retries=0), "--queries", "honey bees", "--json",
                       "--quiet", "--no-cache") == (2, "")
    spec = answer_spec(tmp_path, "gone_api", num_retries=0)
    with CountingServer(port):
        check_env(Flow.load(spec).built)
    status, out = run_cli("run", spec, "--queries", "honey bees", "--json", "--quiet", "--no-cache")
    degraded = json.loads(out)["metadata"]["1"]["degraded"]
    assert status == 1 and degraded["step"] == "answer"  # no answer at all: a failed run, its rows printed
    assert degraded["reason"].startswith(f"connection: model 'gone_api' (openai/x at http://127.0.0.1:{port}/v1): "
                                         "connection refused: no server listens there; start it"), degraded
    status, out = run_cli("models", "gone_api", "--check", "--json")
    (row,) = json.loads(out)["models"]
    assert not row["reachable"] and "check" not in row  # no prompt is sent to a server that does not answer
    assert row["why"] == (f"no server answers on http://127.0.0.1:{port}/v1 (ConnectionError); start it, or change "
                          "the alias's api_base in its models file")
    assert "sk-gone-secret" not in out


def test_a_missing_gguf_file_is_refused_before_the_run_in_one_line(tmp_path, monkeypatch, capsys):
    """As a missing encoder is (``MissingModelsError``): the step and the file named, nothing run."""
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    missing = tmp_path / "nope.gguf"
    out = tmp_path / "out.jsonl"
    assert main(["run", answer_spec(tmp_path, f"tessera/{missing}"), "--queries", "honey bees", "--no-cache",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and not out.exists(), err
    assert err.startswith("tessera: error: 1 model(s) needed are not on this machine, so nothing was run: "
                          f"'{missing}' for flow answer, step answer (params.model): model path {missing} does not "
                          "exist"), err


def test_a_short_answers_sources_are_not_said_to_be_uncited(fault_models, tmp_path, run_cli):
    """style: short asks for the answer span and no citations: its sources line says how they were found, not that
    the model cited none."""
    fault_models.reply = "Flower nectar"  # in no document word for word: sources by shared words
    status, out = run_cli("run", answer_spec(tmp_path, "fault-ok", style="short"), "--queries",
                          "what do bees make honey from", "--no-cache")
    assert status == 0 and "answer:" in out, out
    assert "sources (attributed by shared words, not cited by the model):" in out and "cited none" not in out


@pytest.mark.parametrize("reply, cut", [("Flower nectar.\nBees collect it from", False), ("Flower nectar that", True)])
def test_the_cli_says_an_answer_was_cut_only_when_max_tokens_fell_in_it(fault_models, tmp_path, run_cli, reply, cut):
    """A short answer's model stopped at max_tokens in the line after its answer (SmolLM2 goes on after a short
    answer): the answer is whole, and the run says nothing of a cut, nor prints the raw finish reason."""
    fault_models.reply = reply
    status, out = run_cli("run", answer_spec(tmp_path, "fault-length", style="short"), "--queries",
                          "what do bees make honey from", "--no-cache")
    assert status == 0 and "answer: Flower nectar" in out, out
    assert ("cut off at the step's max_tokens" in out) is cut and "finish_reason" not in out


def test_a_run_that_wrote_no_answer_at_all_fails_as_an_ingest_of_no_document_does(fault_models, tmp_path, capsys,
                                                                                   monkeypatch):
    """Every query's answer step degraded (the model answers HTTP 500): the run printed its rows and a warning, and
    exited 0, so a script read it as done. It exits 1 now, saying why in one line; one answer is enough for 0."""
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    spec = answer_spec(tmp_path, "fault-error", num_retries=0)
    status = main(["run", spec, "--queries", "honey bees", "--queries", "opera singers", "--no-cache", "--json"])
    printed = capsys.readouterr()
    assert status == 1, printed.err
    assert json.loads(printed.out)["rows"], printed.out  # the results are printed all the same
    said = [line for line in printed.err.splitlines() if line.startswith("tessera: error: ")]
    assert len(said) == 1 and said[0].startswith("tessera: error: no answer was written: the answer step failed for "
                                                 "all 2 queries (the first: "), printed.err
    assert "the fault server failed on purpose" in said[0], said
    assert main(["run", answer_spec(tmp_path, "fault-ok"), "--queries", "honey bees", "--no-cache"]) == 0
