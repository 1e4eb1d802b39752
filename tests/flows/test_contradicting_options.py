"""Two options that contradict each other are refused naming them, before anything runs, not one of them ignored.
Through flows.commands.main, in a TESSERA_HOME of the test's own."""

from __future__ import annotations

import pytest

from flows.commands import main


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.mark.parametrize("command", [["run", "bm25", "-q", "bees"], ["chat", "rag"]])
def test_no_cache_with_a_cache_dir_is_refused_not_ignored(home, tmp_path, capsys, command):
    """The folder was ignored: the run went on without a cache (as bench refuses --mlflow-uri with --no-mlflow)."""
    assert main([*command, "--no-cache", "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "--no-cache and --cache-dir: give one" in err and len(err.strip().splitlines()) == 1, err
