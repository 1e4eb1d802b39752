"""``tessera models`` says what a run would find: an alias that names no server is not reachable (a run refuses it),
``--check`` waits for an alias's reply as long as its ``timeout`` says (as a run's calls do), and a misspelt alias
gets the close names, as other unknown names do."""

from __future__ import annotations

import json
import time

from flows.commands import main


def test_an_alias_that_names_no_server_is_not_reachable(tmp_path, monkeypatch, run_cli):
    """``hosted_vllm/foo`` without an api_base was "reachable: yes" while ``--check`` and ``tessera run`` said it
    names no server."""
    monkeypatch.delenv("HOSTED_VLLM_API_BASE", raising=False)
    models = tmp_path / "m.yaml"
    models.write_text("mine: hosted_vllm/foo\n")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    status, out = run_cli("models", "mine", "--check", "--json")
    (row,) = json.loads(out)["models"]
    assert status == 0 and not row["reachable"] and "check" not in row
    assert row["why"].startswith("hosted_vllm/foo names no server: litellm has no address for hosted_vllm")
    assert row["why"].endswith("or set $HOSTED_VLLM_API_BASE; see docs/llm.md, Model aliases (`tessera docs llm`)")
    monkeypatch.setenv("HOSTED_VLLM_API_BASE", "http://127.0.0.1:9/v1")  # litellm's own address for it
    status, out = run_cli("models", "mine", "--json")
    assert json.loads(out)["models"][0]["reachable"]


def test_check_waits_as_long_as_the_aliases_timeout(fault_models, tmp_path, monkeypatch, run_cli):
    """A fixed 60 s: an alias with ``timeout: 1`` waited for a reply 5 s late (and ``local``, whose alias says 300 s,
    failed after 60 s on a busy CPU)."""
    monkeypatch.setattr(fault_models, "delay", 5.0)
    monkeypatch.setenv("TESSERA_MODELS", str(fault_models.models_file(tmp_path / "short.yaml", timeout=0.5)))
    started = time.perf_counter()
    status, out = run_cli("models", "fault-slow", "--check", "--json")
    (row,) = json.loads(out)["models"]
    assert status == 0 and row["reachable"], row
    assert not row["check"]["answered"] and row["check"]["error"].startswith("model 'fault-slow'"), row
    assert row["check"]["error"].endswith("the server sent nothing for 0.5 s (the timeout)"), row
    assert time.perf_counter() - started < 4.5 and fault_models.attempts["slow"] == 1


def test_check_json_gives_each_outcome_as_fields(fault_models, run_cli):
    """``--check --json`` printed the check as the table's sentence ("answered in 0.01 s (5+4 tokens): 'Honey...'",
    "failed: ..."), which a script had to parse: now one JSON document whose fields say it, the table unchanged."""
    names = ("fault-ok", "fault-html", "fault-error", "fault-refused")
    status, out = run_cli("models", *names, "--check", "--json")
    rows = {row["alias"]: row for row in json.loads(out)["models"]}  # the whole of stdout is the document
    assert status == 0 and sorted(rows) == sorted(names)
    ok, html = rows["fault-ok"], rows["fault-html"]
    assert ok["reachable"] is True and ok["why"] == f"a server answers on {fault_models.base}/ok/v1", ok
    assert ok["check"]["answered"] is True and ok["check"]["reply"] == "Honey bees make honey [1].\nSources: 1", ok
    assert ok["check"]["completion_tokens"] > 0 and ok["check"]["seconds"] >= 0, ok
    assert html["reachable"] is True and html["check"]["answered"] is False, html
    assert "reply is not valid JSON" in html["check"]["error"] and not html["check"]["error"].startswith("failed")
    for gone in ("fault-error", "fault-refused"):  # not reachable: the reason as text, no prompt sent
        assert rows[gone]["reachable"] is False and rows[gone]["why"] and "check" not in rows[gone], rows[gone]
    status, out = run_cli("models", "fault-ok", "fault-html", "--check")
    assert status == 0 and "answered in 0." in out and "'Honey bees make honey" in out, out
    assert "failed: model 'fault-html'" in out, out


def test_a_misspelt_alias_is_named_with_the_close_aliases(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    monkeypatch.delenv("TESSERA_MODELS", raising=False)
    assert main(["models", "gemma", "nothing_like_it"]) == 2
    err = capsys.readouterr().err
    assert "no model alias gemma (did you mean 'gemma2'?), nothing_like_it; aliases: local, gemma2," in err, err
    assert "field 'NAME'" in err and "'names'" not in err, err  # the argument as its help names it
