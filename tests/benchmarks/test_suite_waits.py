"""benchmarks/suite_waits.py, the pytest plugin that says where a run waits: a real pytest in a subprocess with two
xdist workers (whose figures reach the controller with the teardown reports), over a test that sleeps, one that works
and one that waits for a child process that works."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

TESTS = """
import subprocess, sys, time

def test_sleeps():
    time.sleep(0.4)

def test_works():
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass

def test_child_works():
    subprocess.run([sys.executable, "-c", "import time\\nend = time.process_time() + 0.2\\n"
                    "while time.process_time() < end: pass"], check=True)
"""


def _rows(output: str) -> dict[str, tuple[float, float, float]]:
    """The plugin's table: test name -> (wait, wall, cpu)."""
    found = re.findall(r"^\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)  \S+::(\w+)$", output, re.M)
    return {name: (float(wait), float(wall), float(cpu)) for wait, wall, cpu, name in found}


@pytest.mark.process
def test_a_sleep_is_a_wait_and_work_in_the_test_or_its_child_is_not(tmp_path):
    (tmp_path / "test_three.py").write_text(TESTS)
    done = subprocess.run(
        # anyio's and hypothesis' plugins left out too (the three tests use neither): they cost each of its three
        # processes (pytest and its two workers) a third of a second of imports, trio's among them
        [sys.executable, "-m", "pytest", "-p", "suite_waits", "-p", "no:cacheprovider", "-p", "no:schemathesis",
         "-p", "no:anyio", "-p", "no:hypothesispytest", "--rootdir", str(tmp_path), "-c", os.devnull, "-q", "-n", "2",
         str(tmp_path / "test_three.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "benchmarks"), str(REPO)])})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "where the tests waited (suite_waits)" in done.stdout and "3 tests: " in done.stdout
    rows = _rows(done.stdout)
    assert set(rows) == {"test_sleeps", "test_works", "test_child_works"}, done.stdout
    assert rows["test_sleeps"][0] >= 0.35 and rows["test_sleeps"][2] < 0.1
    assert rows["test_works"][2] >= 0.15 and rows["test_child_works"][2] >= 0.15
    waits = [wait for wait, _, _ in rows.values()]
    assert waits == sorted(waits, reverse=True)  # the longest wait first
