"""A home on a read-only disk (a backup mounted read-only) still searches: ``tessera run`` with its step cache there
gives the run's rows, served from the cache, says once that the cache cannot be written (so nothing new is stored),
and writes nothing in the home. It stopped at the cache's first write with ``tessera: internal error:
OperationalError: attempt to write a readonly database``, then ran with the cache off
(``tests/flows/test_unwritable_cache_hits.py``). A real read-only bind mount (``mount -o remount,bind,ro`` in a
mount namespace of the test's own, as root; skipped where this user may not make one) over a real home, index and
step cache."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import bm25_sample_index

REPO = Path(__file__).resolve().parents[2]
READ_ONLY = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'

pytestmark = [pytest.mark.process,
              pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("unshare") is None,
                                 reason="a read-only bind mount needs Linux's unshare")]


def tessera(home: Path, *args: str, read_only: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "flows", *args]
    if read_only:
        command = ["unshare", "-m", "sh", "-c", READ_ONLY, str(home), *command]
    env = {**os.environ, "TESSERA_HOME": str(home), "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    env.pop("TESSERA_DEBUG", None)
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)


def files_of(home: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(home)): (p.stat().st_size, p.stat().st_mtime_ns) for p in home.rglob("*")}


@pytest.fixture
def home(tmp_path) -> Path:
    """A home with an index (``docs``, BM25 only)."""
    return made_home(tmp_path / "home")


def made_home(home: Path) -> Path:
    bm25_sample_index(home / "indices" / "docs", 50)
    probe = subprocess.run(["unshare", "-m", "sh", "-c", READ_ONLY, str(home), "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no read-only bind mount here: {probe.stderr.decode(errors='replace').strip()}")
    return home


SEARCH = ("run", "bm25", "--index", "docs", "-q", "gothic cathedrals", "--json", "--top", "3")


@pytest.fixture(scope="module")
def filled_home(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A home whose step cache one run (``SEARCH``) has filled, and that run: once for the module."""
    home = made_home(tmp_path_factory.mktemp("filled") / "home")
    first = tessera(home, *SEARCH)
    assert first.returncode == 0, first.stderr
    assert (home / "cache" / "index.sqlite").is_file()
    return home, first


@pytest.fixture
def filled(filled_home, tmp_path) -> tuple[Path, subprocess.CompletedProcess]:
    """A copy of ``filled_home`` (file for file: one writable run for the module, not one a test) and its run."""
    home, first = filled_home
    return Path(shutil.copytree(home, tmp_path / "home")), first


def test_a_run_in_a_read_only_home_searches_with_its_cache_and_writes_nothing(filled):
    home, first = filled
    before = files_of(home)
    done = tessera(home, *SEARCH, read_only=True)
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr
    said = [line for line in done.stderr.splitlines() if "cannot be written" in line]
    assert said == [f"tessera: warning: the step cache {home / 'cache'} cannot be written (a read-only file "
                    "system): the run reads what is stored there and stores nothing new; pass --cache-dir DIR for "
                    "a folder this user can write, or --no-cache"], done.stderr
    assert json.loads(done.stdout)["rows"] == json.loads(first.stdout)["rows"] != []
    assert json.loads(done.stdout)["steps"]["bm25"]["hits"] == 1, done.stdout  # served from the copied cache
    assert files_of(home) == before


def test_the_summary_of_such_a_run_gives_its_hits(filled):
    home, _ = filled  # its cache holds the search of "gothic cathedrals"
    done = tessera(home, "run", "bm25", "--index", "docs", "-q", "gothic cathedrals", "--top", "1", read_only=True)
    assert done.returncode == 0, done.stderr
    assert "cache hit ratio 100%" in done.stdout.splitlines()[-1], done.stdout  # was "cache off"


def test_clearing_or_pruning_a_read_only_cache_is_one_line_and_removes_nothing(filled):
    home, _ = filled
    before = files_of(home)
    for args, said in ((("cache", "clear"), "nothing was deleted"),
                       (("cache", "prune", "--older-than", "0"), "nothing was removed")):
        done = tessera(home, *args, read_only=True)
        assert done.returncode == 2, done.stderr  # clear was an internal error (an OSError half-way)
        assert done.stderr.strip().splitlines() == [
            f"tessera: error: field '--cache-dir': cannot {args[1]} {home / 'cache'}: it cannot be written (a "
            f"read-only file system); {said}"], done.stderr
    assert files_of(home) == before


EXPORT_TWICE = """
import logging
logging.basicConfig(format="%(levelname)s %(message)s")
from operators.models.onnx_query_encoder import export_query_encoder
print(export_query_encoder("all-MiniLM-L6-v2"), export_query_encoder("all-MiniLM-L6-v2"))
"""


def test_a_query_encoder_export_a_read_only_home_refuses_is_said_once(home):
    """A dense search in such a home exports its query encoder into ``$TESSERA_HOME/models``, which fails: the
    warning came once per step that asked (twice in a ``hybrid`` run), as the export was tried again."""
    command = ["unshare", "-m", "sh", "-c", READ_ONLY, str(home), sys.executable, "-c", EXPORT_TWICE]
    env = {**os.environ, "TESSERA_HOME": str(home), "PYTHONPATH": str(REPO), "TESSERA_QUERY_ENCODER": "auto"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["None", "None"]
    said = [line for line in done.stderr.splitlines() if "could not export" in line]
    assert said == ["WARNING could not export 'all-MiniLM-L6-v2' to ONNX for the query fast path: [Errno 30] "
                    f"Read-only file system: '{home / 'models'}'"], done.stderr
    assert not (home / "models").exists()


def test_an_ingest_into_an_index_of_a_read_only_home_is_one_line_that_does_not_say_creating(home, tmp_path):
    source = tmp_path / "more.jsonl"
    source.write_text('{"_id": "n1", "text": "Leafcutter ants farm a fungus."}\n')
    done = tessera(home, "ingest", "--source", str(source), "--index", "docs", "--no-dense", read_only=True)
    assert done.returncode == 2, done.stderr
    index = home / "indices" / "docs"
    assert done.stderr.strip().splitlines() == [
        f"tessera: error: cannot write index {index} (opening it to write): the file system holding {index} is "
        "read-only. Make it writable or give an index path where this user can write, then run the command again. "
        "Nothing of this write was committed: the index holds what it held before"], done.stderr  # "(creating it)"
