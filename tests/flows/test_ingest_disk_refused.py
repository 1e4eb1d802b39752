"""An ingestion that the disk refuses (here a file size limit, ``ulimit -f``, which fails writes with EFBIG as
a full disk fails them with ENOSPC) stops with one line naming the index and the limit, exit status 2, and leaves the
index as it was: the documents committed before stay, each once, and the same command without the limit resumes.
Before, it was ``tessera: internal error: OSError: [Errno 27] File too large`` (exit 1); a full disk was ``[Errno 28]
No space left on device`` with no file or index named. Real files, a real subprocess under a real resource limit."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from flows.ingestion import ingest
from operators.store import Index
from tests.text_checks import TRACEBACK

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample" / "corpus.jsonl"


def corpus(tmp_path: Path, name: str, lines: slice) -> Path:
    path = tmp_path / name
    path.write_text("".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[lines]), encoding="utf-8")
    return path


def doc_ids(index: Path) -> list[str]:
    _, table = Index.open(index).columns(["doc_id"])
    return table.column("doc_id").to_pylist()


def limited(max_bytes: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, max_bytes))
    return apply


def test_a_refused_write_names_the_index_and_loses_nothing(tmp_path):
    index = tmp_path / "idx"
    first, more = corpus(tmp_path, "first.jsonl", slice(0, 30)), corpus(tmp_path, "more.jsonl", slice(30, 90))
    ingest(first, index, settings={"dense": False}, shard_size=10, executor="local", chunk=False, progress=False)
    before = json.loads((index / "manifest.json").read_text())
    command = [sys.executable, "-m", "flows.ingest", "--source", str(more), "--index", str(index), "--no-dense",
               "--no-chunk", "--shard-size", "30", "--executor", "local", "--quiet"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, preexec_fn=limited(8192),
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    said = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert said[-1].startswith(f"tessera: error: cannot write index {index} ("), done.stderr
    assert "file size limit (`ulimit -f`)" in said[-1] and "Nothing of this write was committed" in said[-1]
    assert "internal error" not in done.stderr and TRACEBACK not in done.stderr
    assert json.loads((index / "manifest.json").read_text())["shards"] == before["shards"]
    assert sorted(doc_ids(index)) == sorted(json.loads(line)["_id"] for line in first.read_text().splitlines())
    ingest(more, index, settings={"dense": False}, shard_size=30, executor="local", chunk=False, progress=False)
    ids = doc_ids(index)
    assert len(ids) == len(set(ids)) == 90


def test_an_add_the_disk_refuses_names_the_shard_and_commits_nothing(tmp_path):
    index = tmp_path / "idx"
    first, more = corpus(tmp_path, "first.jsonl", slice(0, 10)), corpus(tmp_path, "more.jsonl", slice(10, 60))
    ingest(first, index, settings={"dense": False}, shard_size=10, executor="local", chunk=False, progress=False)
    before = json.loads((index / "manifest.json").read_text())
    done = subprocess.run([sys.executable, "-m", "flows", "index", "add", str(index), str(more)], cwd=REPO,
                          capture_output=True, text=True, timeout=300, preexec_fn=limited(8192),
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2, done.stderr
    assert f"tessera: error: cannot write index {index} (writing shard 'add-" in done.stderr, done.stderr
    assert "internal error" not in done.stderr
    assert json.loads((index / "manifest.json").read_text())["shards"] == before["shards"]
    assert not [p.name for p in (index / "shards").iterdir() if p.name.startswith(".tmp-")]  # the half-written shard
    assert len(doc_ids(index)) == 10
