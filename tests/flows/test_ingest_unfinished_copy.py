"""An index folder copied while an ingestion wrote it (a backup taken mid-run, ``cp -a`` of a busy home) holds the
run's staging and its lock file, but no run: ``tessera index info`` and ``tessera run`` said of it, as of the index
where the run went on, ``interrupted, or still running``, so a user of the copy could wait for a run that never ends.
Each now says which it is, from the index's lock (the shared ``flock`` every run holds, ``running.Running``): the
copy ``interrupted: no ingest runs on it`` and the original, while a run holds its lock, ``still running``. A real
ingest killed after its first shard, the folder copied, the lock held the way a run holds it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flows.commands import main
from flows.ingestion.running import Running

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample" / "corpus.jsonl"


def info(capsys, index: Path) -> tuple[str, dict]:
    capsys.readouterr()
    assert main(["index", "info", str(index)]) == 0
    text = next(line for line in capsys.readouterr().out.splitlines() if "unfinished ingestion" in line)
    assert main(["index", "info", str(index), "--json"]) == 0
    [record] = json.loads(capsys.readouterr().out)["unfinished_ingestions"]
    return text.strip(), record


@pytest.mark.process
def test_a_copy_taken_mid_ingestion_says_no_run_is_there_and_the_original_that_one_runs(tmp_path, capsys,
                                                                                      monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:60]), encoding="utf-8")
    index = tmp_path / "idx"
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "TESSERA_FAULT": "crash_after_write:1"}
    env.pop("TESSERA_DEBUG", None)
    crashed = subprocess.run([sys.executable, "-m", "flows", "ingest", "--source", str(corpus), "--index", str(index),
                              "--shard-size", "20", "--executor", "local", "--no-dense", "--quiet"], cwd=REPO,
                             capture_output=True, text=True, timeout=300, env=env)
    assert crashed.returncode == 75, crashed.stderr  # its staging and lock file stay, as a live run's would
    with Running(index):  # a run goes on in the original while it is copied
        copy = tmp_path / "copy"
        shutil.copytree(index, copy)
        text, record = info(capsys, index)
        assert record["running"] is True
        assert "; still running: an ingest holds the index's lock now); if it stops, resume: tessera ingest" in text
        text, record = info(capsys, copy)
        assert record["running"] is False
        assert "1 of 3 shard(s) committed, 40 document(s) not yet in the index; interrupted: no ingest runs on " \
               f"it); resume: {record['resume']}" in text
        assert f"--index {copy}" in record["resume"]
    _, record = info(capsys, index)  # the run over: interrupted there too
    assert record["running"] is False
