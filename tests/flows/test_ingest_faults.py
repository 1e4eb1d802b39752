"""Ingestion survives real faults: a killed embed worker, a killed driver, a crash between a
shard's write and its manifest commit. Each time the finished index holds exactly the chunk
ids of an uninterrupted run, each once.

Driver faults run ``python -m flows.ingest`` in a subprocess (its own session, killed with
SIGKILL or exiting through the ``crash_after_write`` hook); the resumed run is in-process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from flows.ingestion import ingest
from flows.ingestion.faults import CRASH_EXIT_STATUS
from operators.store import Index

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample" / "corpus.jsonl"
CHUNK = {"unit": "tokens", "size": 48, "overlap": 8}
SPEC = f"""
name: ingest-test
steps:
  read: {{op: sources.jsonl, params: {{path: unused.jsonl}}}}
  chunk: {{op: preprocess.chunk, params: {json.dumps(CHUNK)}}}
  embed: {{op: embed.sentence_transformer, params: {{title_column: title}}, batch_size: 16}}
"""


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:20]), encoding="utf-8")
    return path


@pytest.fixture
def reference(tmp_path, corpus, committed_docnos) -> list[str]:
    """Chunk ids of an uninterrupted run (BM25 only: the ids do not depend on vectors)."""
    ingest(corpus, tmp_path / "reference", settings={"dense": False}, shard_size=5, executor="local",
           chunk=CHUNK, progress=False)
    return committed_docnos(tmp_path / "reference")


def _command(tmp_path: Path, corpus: Path, index: Path, *extra: str) -> list[str]:
    spec = tmp_path / "ingest-test.yaml"
    spec.write_text(SPEC, encoding="utf-8")
    return [sys.executable, "-m", "flows.ingest", "--source", str(corpus), "--index", str(index), "--spec", str(spec),
            "--shard-size", "5", "--executor", "local", "--quiet", *extra]


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **extra}


@pytest.mark.ray
@pytest.mark.slow
def test_killed_embed_worker_is_restarted(tmp_path, corpus, reference, ray_session, monkeypatch, committed_docnos):
    monkeypatch.setenv("TESSERA_FAULT", "kill_worker_once:1")
    report = ingest(corpus, tmp_path / "idx", shard_size=5, executor="ray", chunk=CHUNK, progress=False)
    assert list((tmp_path / "idx" / "_ingest" / "faults").glob("killed-*-00001"))  # the worker did die
    assert committed_docnos(tmp_path / "idx") == reference
    assert report.shards_written == 4 and report.failures == 0


@pytest.mark.slow
def test_killed_driver_resumes_where_it_stopped(tmp_path, corpus, reference, committed_docnos):
    index = tmp_path / "idx"
    proc = subprocess.Popen(_command(tmp_path, corpus, index), cwd=REPO, env=_env(), start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if (index / "manifest.json").exists() and Index.open(index).finished_shards():
                break
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-2000:]
    done = len(Index.open(index).finished_shards())
    assert 1 <= done < 4  # killed mid-run
    report = ingest(corpus, index, shard_size=5, executor="local", chunk=CHUNK, progress=False)
    assert report.shards_skipped == done and report.shards_written == 4 - done
    assert report.chunks_embedded == report.chunks  # finished shards were not embedded again
    assert committed_docnos(index) == reference


@pytest.mark.process
def test_crash_between_shard_write_and_commit(tmp_path, corpus, reference, committed_docnos):
    index = tmp_path / "idx"
    crashed = subprocess.run(_command(tmp_path, corpus, index, "--no-dense"), cwd=REPO,
                             env=_env(TESSERA_FAULT="crash_after_write:1"), capture_output=True, timeout=300)
    assert crashed.returncode == CRASH_EXIT_STATUS, crashed.stderr.decode()[-2000:]
    finished = Index.open(index).finished_shards()
    written = {p.name for p in (index / "shards").iterdir() if not p.name.startswith(".")}
    assert len(finished) == 1 and len(written) == 2  # shard 1 is on disk, not in the manifest
    report = ingest(corpus, index, shard_size=5, executor="local", chunk=CHUNK, progress=False)
    assert (report.shards_skipped, report.shards_written) == (1, 3)
    assert committed_docnos(index) == reference
