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
    assert row["why"].endswith("or set $HOSTED_VLLM_API_BASE")
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
    assert row["check"].startswith("failed: model 'fault-slow'") and row["check"].endswith("no reply within 0.5 s")
    assert time.perf_counter() - started < 4.5 and fault_models.attempts["slow"] == 1


def test_a_misspelt_alias_is_named_with_the_close_aliases(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    monkeypatch.delenv("TESSERA_MODELS", raising=False)
    assert main(["models", "gemma", "nothing_like_it"]) == 2
    err = capsys.readouterr().err
    assert "no model alias gemma (did you mean 'gemma2'?), nothing_like_it; aliases: local, gemma2," in err, err
    assert "field 'NAME'" in err and "'names'" not in err, err  # the argument as its help names it
