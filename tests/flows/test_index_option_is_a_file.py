"""A corpus file given as ``--index`` to ``tessera run``, ``tessera index info`` and ``tessera ingest``: one line
that says it is a file, not an index folder, with status 2; ``ingest`` writes nothing into it. Each command run
as a user runs it, in its own process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TESSERA = Path(sys.executable).with_name("tessera")


@pytest.fixture
def corpus(tmp_path) -> Path:
    copy = tmp_path / "corpus.jsonl"
    shutil.copy2(REPO / "data" / "sample" / "corpus.jsonl", copy)
    return copy


def one_line_error(*args: str, home: Path) -> str:
    env = {**os.environ, "TESSERA_HOME": str(home)}
    env.pop("TESSERA_DEBUG", None)
    proc = subprocess.run([str(TESSERA), *args], env=env, capture_output=True, text=True, timeout=300)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_run_and_index_info_call_a_corpus_file_a_file_and_offer_it_as_the_source(corpus, tmp_path):
    for args in (["run", "hybrid", "--index", str(corpus), "--queries", "honey bees"], ["index", "info", str(corpus)]):
        line = one_line_error(*args, home=tmp_path / "home")
        assert f"{corpus} is a file, not an index folder" in line, line
        assert f"tessera ingest --source {corpus} --index NAME" in line and f"--index {corpus}`" not in line, line


def test_ingest_into_a_file_is_refused_and_leaves_it_as_it_was(corpus, tmp_path):
    before = corpus.read_bytes()
    line = one_line_error("ingest", "--source", str(REPO / "data" / "sample" / "queries.jsonl"), "--index",
                          str(corpus), "--no-dense", "--quiet", home=tmp_path / "home")
    assert f"{corpus} is a file, not an index folder" in line and "internal error" not in line, line
    assert corpus.read_bytes() == before
    line = one_line_error("ingest", "--index", str(corpus), "--no-dense", "--quiet", home=tmp_path / "home")
    assert f"to index it: `tessera ingest --source {corpus} --index NAME`" in line, line
