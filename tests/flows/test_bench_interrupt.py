"""Ctrl-C during ``tessera bench``'s index build: a real process, interrupted as a terminal does it (SIGINT to
its process group), as ``test_ingest_interrupt`` does for ``tessera ingest``; both commands share
``flows.commands.ingest_interrupt.StopOnInterrupt``, and its line says the command that resumes.

The build stops within one encoder call (status 130, one line); a second Ctrl-C while the process waits for that
call used to interrupt the interpreter's exit (a traceback, or a C++ abort, status 134); now it exits 130 at once.
The index is not marked built, so the next benchmark resumes it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.flows.ctrl_c import assert_interrupted, interrupt_when

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"
TESSERA = Path(sys.executable).parent / "tessera"


@pytest.fixture
def dataset(tmp_path) -> Path:
    """A BEIR-layout dataset from the bundled sample: 400 documents, its 4 queries, one judgement each."""
    root = tmp_path / "sample400"
    (root / "qrels").mkdir(parents=True)
    lines = (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)[:400]
    (root / "corpus.jsonl").write_text("".join(lines), encoding="utf-8")
    (root / "queries.jsonl").write_text((SAMPLE / "queries.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    qids = [json.loads(line)["_id"] for line in (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    docs = [json.loads(line)["_id"] for line in lines]
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n"
                                             + "".join(f"{q}\t{d}\t1\n" for q, d in zip(qids, docs)), encoding="utf-8")
    return root


def _interrupt_while_embedding(proc: subprocess.Popen, *, twice: bool = False) -> tuple[list[str], float]:
    """Ctrl-C once the index build has staged the corpus and begun embedding it (inside its first encoder call)."""
    return interrupt_when(proc, lambda line: line.startswith("ingest: ") and line.endswith(" shard(s)"),
                          after_s=0.5, twice=twice)


def _bench_cli(dataset: Path, home: Path, out: Path) -> subprocess.Popen:
    """``tessera bench`` of the dense flow (its index is built first), in a session of its own, SIGINT at its
    default (a background job may ignore it)."""
    env = {**os.environ, "TESSERA_HOME": str(home), "COLUMNS": "120"}
    return subprocess.Popen([str(TESSERA), "bench", "--dataset", str(dataset), "--flow", "dense", "--out", str(out),
                             "--k", "1,10", "--no-mlflow"], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


@pytest.mark.slow
def test_ctrl_c_stops_a_bench_index_build_and_a_second_one_exits_at_once(tmp_path, dataset):
    home = tmp_path / "home"
    proc = _bench_cli(dataset, home, tmp_path / "out")
    lines, seconds = _interrupt_while_embedding(proc)
    assert_interrupted(proc, lines, seconds, resume=True)
    assert any(line.startswith("building index ") for line in lines), lines
    auto = home / "indices" / "auto"
    assert not list(auto.glob("*.done.json"))  # not marked built: the next benchmark resumes it

    proc = _bench_cli(dataset, home, tmp_path / "out")  # again, interrupted twice: no abort, no traceback
    lines, seconds = _interrupt_while_embedding(proc, twice=True)
    assert_interrupted(proc, lines, seconds, resume=True)
    assert not list(auto.glob("*.done.json"))
