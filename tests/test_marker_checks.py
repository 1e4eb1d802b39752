"""tests/conftest.py's checks that keep torch models and started programs out of ``make test-fast``, each run on a
test file of its own in a pytest of its own (the checks are the suite's conftest, copied beside it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

def _pytest_of_its_own(folder: Path, name: str, source: str) -> subprocess.CompletedProcess:
    """``source`` as the test file ``name`` in ``folder`` beside a copy of the suite's conftest, run by a pytest of
    its own (no xdist, every outcome listed)."""
    shutil.copy(TESTS / "conftest.py", folder / "conftest.py")
    (folder / name).write_text(source)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-rA",
                           "-W", "ignore::pytest.PytestUnknownMarkWarning", name],
                          cwd=folder, capture_output=True, text=True, timeout=300)


MODEL_TESTS = '''
import pytest


def _model():
    import torch

    return torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.ReLU())


@pytest.fixture(scope="session")
def built():
    model = _model()
    model(__import__("torch").zeros(1, 4))  # a fixture that calls its model (as untrained_ce does) marks no test
    return model


def test_runs_a_model_unmarked():
    _model()(__import__("torch").zeros(1, 4))


def test_only_uses_a_fixture_that_ran_one(built):
    assert built is not None


def test_builds_a_model_without_calling_it():
    _model()


@pytest.mark.integration
def test_runs_a_model_marked():
    _model()(__import__("torch").zeros(1, 4))


def test_runs_a_model_unmarked_after_the_check_fired_once():
    _model()(__import__("torch").zeros(1, 4))
'''


@pytest.mark.integration  # a pytest of its own that imports torch: about 3 s
def test_a_test_whose_body_calls_a_torch_model_fails_unless_kept_out_of_the_inner_loop(tmp_path):
    run = _pytest_of_its_own(tmp_path, "test_models.py", MODEL_TESTS)
    # the errors' own lines, not the short summary's (which pytest cuts to the terminal's width, except under CI)
    flagged = set(re.findall(r"^test_models\.py::(\w+): a torch model ran in it: mark it `integration`$",
                             run.stdout, re.MULTILINE))
    assert flagged == {"test_runs_a_model_unmarked", "test_runs_a_model_unmarked_after_the_check_fired_once"}, \
        run.stdout[-3000:]
    assert "5 passed, 2 errors" in run.stdout, run.stdout[-3000:]  # the two fail after their body, at teardown


PROCESS_TESTS = '''
import os
import subprocess
import sys

import pytest


@pytest.fixture(scope="session")
def server():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield child
    child.kill()  # at the session's end, in the last test's teardown
    child.wait()
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_starts_python_unmarked():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.process
def test_starts_python_marked(server):
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_forks_a_child_that_exits():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def test_asks_git():
    subprocess.run(["git", "--version"], capture_output=True, check=True)


def test_last_and_unmarked():
    pass
'''


@pytest.mark.process
def test_a_test_that_starts_a_program_fails_unless_marked_process(tmp_path):
    run = _pytest_of_its_own(tmp_path, "test_processes.py", PROCESS_TESTS)
    flagged = set(re.findall(r"^test_processes\.py::(\w+): it started a process \(.*\): mark it `process`$",
                             run.stdout, re.MULTILINE))
    assert flagged == {"test_starts_python_unmarked"}, run.stdout[-3000:]
    assert "5 passed, 1 error" in run.stdout, run.stdout[-3000:]
