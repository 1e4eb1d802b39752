"""The benchmark scripts' arguments: a size of 0 or less is refused in one line (``--queries -5`` benchmarked all
but 5 queries, ``--repeat 0`` was a traceback of a median of nothing), an index that is not there is one line and
exit 2 (it was a traceback ending in the readable error), and ``--help`` prints the usage (one script ran
instead). Each script in a real subprocess, as a user runs it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.text_checks import TRACEBACK

REPO = Path(__file__).resolve().parents[2]


def script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / name), *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


@pytest.mark.parametrize("name, args, says", [
    ("bm25_throughput.py", ["--queries", "-5"], "--queries must be at least 1, got -5"),
    ("query_batches.py", ["--repeat", "0"], "--repeat must be at least 1, got 0"),
    ("trec_writer.py", ["--queries", "0"], "--queries must be at least 1, got 0"),
])
@pytest.mark.process
def test_a_size_of_zero_or_less_is_refused_in_one_line(name, args, says):
    done = script(name, *args)
    assert done.returncode == 2 and done.stderr.strip().endswith(f"{name}: error: {says}"), done.stderr
    assert TRACEBACK not in done.stderr


@pytest.mark.process
def test_an_index_that_is_not_there_is_one_line_not_a_traceback(tmp_path):
    done = script("document_listing.py", "--index", str(tmp_path / "nowhere"))
    assert done.returncode == 2 and TRACEBACK not in done.stderr, done.stderr
    assert done.stderr.strip().startswith(f"document_listing.py: error: no index at {tmp_path / 'nowhere'}")


@pytest.mark.process
def test_help_prints_the_usage_and_runs_nothing():
    done = script("dimensions_tricky.py", "--help")
    assert done.returncode == 0 and done.stdout.startswith("usage: dimensions_tricky.py"), done.stdout
    assert "dates: precision" not in done.stdout  # the benchmark's own result line: it did not run
