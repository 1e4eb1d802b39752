"""A step cache the disk refuses to grow (a full disk, a file size limit) does not stop a run: the run gives what
it computed, says once that its outputs were not stored, and leaves no half-written file behind. Before, pyarrow's
``OSError: File too large`` (or SQLite's ``disk I/O error``) ended ``tessera run`` as an internal error. A real
file size limit (``RLIMIT_FSIZE``, in a child process) on a real cache."""

from __future__ import annotations

import json
import resource
import sqlite3
import subprocess
import sys
from contextlib import closing, nullcontext

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")

SCRIPT = """
import json, resource, sys
from flows.api import Flow

index, cache = sys.argv[1], sys.argv[2]
flow = Flow.load("bm25", index=index)
flow.run(["honey bees"], cache=cache)  # the cache made, while the disk takes anything
queries = ["opera singers", "gothic cathedrals", "volcanic islands", "chess openings"]
plain = flow.run(queries).table
resource.setrlimit(resource.RLIMIT_FSIZE, (1024, resource.RLIM_INFINITY))  # no new file, no growth, over 1 KiB
cached = flow.run(queries, cache=cache).table
print(json.dumps({"same": cached.equals(plain), "rows": cached.num_rows}))
"""


@pytest.mark.process
def test_a_cache_the_disk_refuses_leaves_the_run_whole_and_says_so(bm25_index, tmp_path):
    cache = tmp_path / "cache"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(bm25_index), str(cache)], capture_output=True,
                          text=True, timeout=300, env={**_env(), "TESSERA_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"same": True, "rows": result["rows"]} and result["rows"] > 0
    assert done.stderr.count(f"the step cache {cache} cannot be written (") == 1, done.stderr
    assert not list((cache / "data").glob("*.tmp"))


def _no_file_may_grow() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # every write of a byte: EFBIG


@pytest.mark.process
@pytest.mark.slow  # three runs, each a process
def test_a_cache_the_disk_will_not_let_be_made_leaves_the_run_whole_and_the_folder_usable(bm25_index, tmp_path):
    """A new cache folder on a full disk: the run prints its results, exit 0, one warning naming the folder; the
    next run, with room, makes the cache and the one after hits it. Before, the run stopped (exit 2, ``cache
    directory ...: File too large``; on a tmpfs, ``index.sqlite is not a step cache database (disk I/O error): move it
    away``) and left an empty marker that every later run refused ("its marker ... cannot be read")."""
    cache = tmp_path / "cache"
    command = [sys.executable, "-m", "flows", "run", "bm25", "--index", str(bm25_index), "--queries", "honey bees",
               "--cache-dir", str(cache), "--executor", "local", "--quiet"]
    env = {**_env(), "TESSERA_HOME": str(tmp_path / "home"), "PYTHONDONTWRITEBYTECODE": "1"}
    full = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, preexec_fn=_no_file_may_grow)
    assert full.returncode == 0, full.stderr
    assert "bm25: " in full.stdout and "cache hit ratio 0%" in full.stdout
    said = [line for line in full.stderr.splitlines() if line.startswith("tessera:")]
    assert said == [f"tessera: warning: the step cache {cache} cannot be written (a file would grow past this "
                    "process's file size limit (`ulimit -f`)): the run reads what is stored there and stores nothing "
                    "new; free space there, or run with --no-cache"], full.stderr
    for hits in ("0%", "100%"):  # room again: the same folder is made a cache, then hit
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0 and "tessera:" not in done.stderr, done.stderr
        assert f"cache hit ratio {hits}" in done.stdout, done.stdout


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "TESSERA_HOME"}



@pytest.mark.process
@pytest.mark.slow  # four runs and a prune, each a process
@pytest.mark.parametrize("held", [True, False], ids=["a-run-holds-the-database", "database-closed"])
def test_a_prune_on_a_full_disk_frees_the_space_it_removes(bm25_index, tmp_path, held):
    """``tessera cache prune``, what a user runs to free a full disk, could not record its deletions there and
    stopped with ``tessera: internal error: OperationalError: database or disk is full`` (a run holding the database
    open, so SQLite's -shm file is there) or ``cache directory ...: disk I/O error`` (none: SQLite cannot make it),
    every file left in place. The files go first when the database cannot take the deletion, or be opened; their
    entries are misses the next run drops."""
    cache = tmp_path / "cache"
    env = {**_env(), "TESSERA_HOME": str(tmp_path / "home"), "PYTHONDONTWRITEBYTECODE": "1"}
    run = [sys.executable, "-m", "flows", "run", "bm25", "--index", str(bm25_index), "--cache-dir", str(cache),
           "--executor", "local", "--quiet", "--queries"]
    for query in ("classical music", "gothic architecture"):
        assert subprocess.run([*run, query], capture_output=True, text=True, timeout=300, env=env).returncode == 0
    assert len(list((cache / "data").glob("*.arrow"))) == 2
    prune = [sys.executable, "-m", "flows", "cache", "prune", "--max-size", "0", "--cache-dir", str(cache)]
    with closing(sqlite3.connect(cache / "index.sqlite")) if held else nullcontext() as conn:
        if conn is not None:
            conn.execute("SELECT count(*) FROM units").fetchall()
        done = subprocess.run(prune, capture_output=True, text=True, timeout=300, env=env,
                              preexec_fn=_no_file_may_grow)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"pruned {cache}: removed 2 file(s)"), done.stdout
    assert list((cache / "data").glob("*.arrow")) == []
    again = subprocess.run([*run, "classical music"], capture_output=True, text=True, timeout=300, env=env)
    assert again.returncode == 0 and "tessera:" not in again.stderr, again.stderr
    assert "cache hit ratio 0%" in again.stdout  # its entry pointed at a removed file: a miss, stored again
    info = subprocess.run([sys.executable, "-m", "flows", "cache", "info", "--cache-dir", str(cache), "--json"],
                          capture_output=True, text=True, timeout=300, env=env)
    assert json.loads(info.stdout)["files"] == 1, info.stdout


@pytest.mark.process
@pytest.mark.slow  # a run, then info and explain twice each, each a process
@pytest.mark.parametrize("checkpointed", [False, True], ids=["a-run-left-its-wal", "database-closed"])
def test_cache_info_and_explain_on_a_full_disk_answer_as_with_room(bm25_index, tmp_path, checkpointed):
    """``tessera cache info`` and ``explain`` only read, yet on a full disk they ended ``tessera: internal error:
    OperationalError: disk I/O error`` (exit 1): SQLite could not make or grow the database's -shm file. They now
    read it with the WAL's index in memory and answer as they do with room, leaving the cache's files as they were."""
    cache = tmp_path / "cache"
    env = {**_env(), "TESSERA_HOME": str(tmp_path / "home"), "PYTHONDONTWRITEBYTECODE": "1"}
    run = [sys.executable, "-m", "flows", "run", "bm25", "--index", str(bm25_index), "--cache-dir", str(cache),
           "--executor", "local", "--quiet", "--queries", "classical music"]
    assert subprocess.run(run, capture_output=True, text=True, timeout=300, env=env).returncode == 0
    if checkpointed:  # the last connection closed: its -wal folded into the database, no -wal or -shm left
        with closing(sqlite3.connect(cache / "index.sqlite")) as conn:
            conn.execute("SELECT count(*) FROM units").fetchall()
    else:  # a run's process ended holding it: its entries are in the -wal file only
        (cache / "index.sqlite-shm").unlink(missing_ok=True)
    assert (cache / "index.sqlite-wal").exists() != checkpointed
    info = [sys.executable, "-m", "flows", "cache", "info", "--cache-dir", str(cache), "--json"]
    explain = [sys.executable, "-m", "flows", "cache", "explain", "bm25", "--index", str(bm25_index), "--cache-dir",
               str(cache)]
    for command in (info, explain):
        held = _held(cache)
        full = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env,
                              preexec_fn=_no_file_may_grow)
        assert full.returncode == 0 and "tessera:" not in full.stderr, full.stderr
        assert _held(cache) == held  # what the cache holds, as it was
        room = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert room.returncode == 0 and full.stdout == room.stdout, (full.stdout, room.stdout)
        if command is info:
            assert json.loads(full.stdout)["files"] == 1, full.stdout
        else:
            assert "last run   1 units, 0 hits (0%)" in full.stdout, full.stdout


def _held(cache) -> dict[str, int]:
    """The cache's files that hold bytes, and how many (SQLite may leave an empty -wal or -shm where it made one)."""
    return {path.name: path.stat().st_size for path in cache.iterdir() if path.is_file() and path.stat().st_size
            and not path.name.endswith("-shm")}
