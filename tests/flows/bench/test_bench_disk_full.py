"""A benchmark whose ``--out`` the disk refuses (here a file size limit, ``RLIMIT_FSIZE`` 0, which fails every write
with EFBIG as a full disk fails it with ENOSPC) stops with one line naming ``--out``, what could not be written and
what to do, exit 2, and leaves no half-written run behind; with room, the same command completes. Before, it was
``tessera: internal error: OSError: [Errno 28] Error writing bytes to file`` (exit 1), no file named. A real
dataset of a few lines, a real benchmark in a real child process under a real resource limit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.flows.bench.test_own_data import BEIR, write_dataset

pytestmark = [pytest.mark.process, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]


def _no_file_may_grow() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))


def test_an_out_folder_the_disk_refuses_is_named_and_left_clean(tmp_path):
    dataset = write_dataset(tmp_path / "d", BEIR)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TESSERA_HOME": str(tmp_path / "home"), "PYTHONDONTWRITEBYTECODE": "1"}

    def bench(out: Path, **limits) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "flows", "bench", "--dataset", str(dataset), "--flow", "bm25=bm25",
                               "--out", str(out), "--index-dir", str(tmp_path / "indices"), "--no-cache",
                               "--no-mlflow", "--executor", "local", "--quiet"], cwd=REPO, capture_output=True,
                              text=True, timeout=300, env=env, **limits)

    first = bench(tmp_path / "first")  # builds the index, which the limited run then reads
    assert first.returncode == 0, first.stderr
    out = tmp_path / "out"
    refused = bench(out, preexec_fn=_no_file_may_grow)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().splitlines()[-1] == (
        f"tessera: error: field '--out': cannot write --out {out} (the run of flow 'bm25'): a file would grow past "
        "this process's file size limit (`ulimit -f`); free space there (or give another --out), then run the same "
        "command again: the flows whose runs were saved are not run again"), refused.stderr
    assert "internal error" not in refused.stderr
    assert [p.name for p in out.rglob("*") if p.is_file()] == []  # no half-written run taking space
    done = bench(out)
    assert done.returncode == 0, done.stderr
    assert (out / "metrics.json").is_file() and len(list((out / "runs").glob("bm25-*.parquet"))) == 1
