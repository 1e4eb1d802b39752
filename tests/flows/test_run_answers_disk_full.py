"""``tessera run --out`` of a flow that answers, whose disk takes the rows but refuses the answers file beside them
(here a file size limit, ``RLIMIT_FSIZE``, just over the rows' TREC file and under the answers): one line naming the
answers file, what the disk said and where the rows are, exit 2, no temporary file left. Before, it was ``tessera:
internal error: OSError: [Errno 27] File too large`` (exit 1). The model is the local fault server (a real HTTP server
answering as an OpenAI-compatible one); the run is a real child process under a real resource limit."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.flows.test_rag_flow import answer_spec

pytestmark = [pytest.mark.process, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
LIMIT = 512  # bytes: the rows' TREC lines take less, the answers with their sources and usage more


def _files_up_to_the_limit() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.RLIM_INFINITY))


def test_answers_the_disk_refuses_are_named_with_where_the_rows_are(fault_models, tmp_path):
    queries = tmp_path / "q.txt"
    queries.write_text("what do bees make honey from\nwhat is an opera\n", encoding="utf-8")
    out = tmp_path / "out" / "run.trec"
    out.parent.mkdir()
    done = subprocess.run([sys.executable, "-m", "flows", "run", answer_spec(tmp_path, "fault-ok"), "--queries",
                           str(queries), "--out", str(out), "--no-cache", "--quiet"], cwd=REPO, capture_output=True,
                          text=True, timeout=300, preexec_fn=_files_up_to_the_limit,
                          env={**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 2, done.stderr
    answers = out.parent / "run.queries.jsonl"
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith(f"tessera: error: field '--out': cannot write the answers beside --out: {answers}: a file "
                           "would grow past this process's file size limit (`ulimit -f`) (the file system holding "
                           f"{out.parent}, "), said
    assert said.endswith(f" free); the rows are in {out}, the answers were not written: free space, or give --out on "
                         "another disk, and run again"), said
    assert 0 < out.stat().st_size <= LIMIT
    assert sorted(p.name for p in out.parent.iterdir()) == ["run.trec"]
