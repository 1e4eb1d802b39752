"""Bounding the step cache (``StepCache.prune``, ``tessera cache prune``), one cache per folder in a process,
and ``StepCache()`` following ``$TESSERA_HOME``: on a real cache filled by real runs."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from flows.cache import CacheError, StepCache
from flows.cache_prune import parse_size, stored_files
from operators.byte_sizes import format_bytes

QUERIES = ["gothic cathedrals", "classical music", "electric guitar", "fairy tales", "tower of pisa", "folk dance"]


@pytest.fixture
def filled(bm25_index, tmp_path, monkeypatch):
    """A bm25 flow and a cache holding one stored file per query (one run each, in ``QUERIES`` order)."""
    from flows.api import Flow

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.setattr("flows.cache.TOUCH_EVERY_S", 0.0)  # every hit marks its file used (else once a minute)
    flow = Flow.load("bm25", index=bm25_index)
    root = tmp_path / "cache"
    for query in QUERIES:
        assert flow.run(query, cache=root).cache_hit_ratio == 0
    return flow, root


def files_of(root: Path) -> list[tuple[str, int, float]]:
    with sqlite3.connect(root / "index.sqlite") as conn:
        return stored_files(conn, root / "data")


def test_prune_to_a_size_keeps_the_most_recently_used_and_those_still_hit(filled):
    flow, root = filled
    assert flow.run(QUERIES[0], cache=root).cache_hit_ratio == 1  # the first query's file is now the latest used
    files = files_of(root)
    assert len(files) == len(QUERIES)
    newest = files[-1]
    done = StepCache(root).prune(max_bytes=newest[1])
    assert done["files"] == len(QUERIES) - 1 and done["units"] == len(QUERIES) - 1
    assert done["files_left"] == 1 and done["bytes_left"] == newest[1]
    assert [f[0] for f in files_of(root)] == [newest[0]]
    assert sorted(os.listdir(root / "data")) == [newest[0]]
    assert flow.run(QUERIES[0], cache=root).cache_hit_ratio == 1  # kept: still served
    assert flow.run(QUERIES[1], cache=root).cache_hit_ratio == 0  # evicted: recomputed, and stored again
    assert flow.run(QUERIES[1], cache=root).cache_hit_ratio == 1


def test_prune_by_age_removes_only_what_no_run_used_since(filled):
    flow, root = filled
    old = files_of(root)[2][0]
    with sqlite3.connect(root / "index.sqlite") as conn:  # as if its last use were ten days ago
        conn.execute("UPDATE files SET used = used - 10 * 86400 WHERE file = ?", (old,))
    assert StepCache(root).prune(older_than_s=7 * 86400)["files"] == 1
    assert old not in os.listdir(root / "data") and len(files_of(root)) == len(QUERIES) - 1
    assert StepCache(root).prune(older_than_s=7 * 86400)["files"] == 0
    assert sum(flow.run(q, cache=root).cache_hit_ratio == 1 for q in QUERIES) == len(QUERIES) - 1


def test_files_from_a_cache_without_use_records_are_pruned_by_their_age(filled):
    _, root = filled
    with sqlite3.connect(root / "index.sqlite") as conn:  # a cache made before last-use times were recorded
        conn.execute("DELETE FROM files")
    first = sorted(os.listdir(root / "data"))[0]
    os.utime(root / "data" / first, (1, 1))
    done = StepCache(root).prune(older_than_s=86400)
    assert (done["files"], done["units"], done["files_left"]) == (1, 1, len(QUERIES) - 1)
    assert first not in os.listdir(root / "data")


def test_the_cli_prunes_to_a_size_and_refuses_a_bad_one(filled, run_cli):
    _, root = filled
    held = sum(size for _, size, _ in files_of(root))
    status, out = run_cli("cache", "prune", "--max-size", "1T", "--cache-dir", str(root))  # room for all: none go
    assert (status, out.strip()) == (0, f"pruned {root}: removed 0 file(s), 0 unit(s), 0 B; "
                                        f"left {len(QUERIES)} file(s), {format_bytes(held)}")
    assert held < 1 << 20 and format_bytes(held).endswith(" KiB")  # not "0.0 MiB", as every size once read
    status, out = run_cli("cache", "prune", "--max-size", "0", "--cache-dir", str(root), "--json")
    assert status == 0
    done = json.loads(out)
    assert (done["pruned"], done["files"], done["files_left"], done["bytes_left"]) == (True, len(QUERIES), 0, 0)
    assert os.listdir(root / "data") == []
    status, out = run_cli("cache", "prune", "--max-size", "12 parsecs", "--cache-dir", str(root))
    assert status == 2
    status, out = run_cli("cache", "prune", "--cache-dir", str(root))
    assert status == 2
    for days in ("nan", "inf"):  # nan compares false with every age: it pruned nothing and said "pruned"
        status, out = run_cli("cache", "prune", "--older-than", days, "--cache-dir", str(root))
        assert status == 2 and "pruned" not in out, out


def test_prune_refuses_a_folder_that_is_not_a_cache(tmp_path, run_cli):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(CacheError, match="not a Tessera step cache"):
        StepCache(tmp_path).prune(max_bytes=0)
    assert run_cli("cache", "prune", "--max-size", "0", "--cache-dir", str(tmp_path))[0] == 2
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"] and (tmp_path / "notes.txt").read_text() == "mine"
    assert StepCache(tmp_path / "none").prune(max_bytes=0)["files"] == 0  # no cache yet: nothing to do


def test_the_cli_says_nothing_to_prune_where_there_is_no_cache_as_clear_does(tmp_path, run_cli):
    root = tmp_path / "cache"  # $TESSERA_HOME's default cache, never made
    status, out = run_cli("cache", "prune", "--max-size", "0")
    assert (status, out.strip()) == (0, f"nothing to prune at {root}")
    assert run_cli("cache", "clear")[1].strip() == f"nothing to clear at {root}"
    status, out = run_cli("cache", "prune", "--older-than", "1", "--json")
    assert status == 0 and json.loads(out) == {"cache_dir": str(root), "pruned": False, "files": 0, "units": 0,
                                               "bytes": 0, "files_left": 0, "bytes_left": 0, "unfinished": 0,
                                               "calls": 0}  # the keys a prune of a cache gives
    assert not root.exists()


@pytest.mark.parametrize("text, size", [("1048576", 1 << 20), ("500M", 500 << 20), ("1.5G", 3 << 29),
                                        ("2gb", 2 << 30), ("10 K", 10 << 10),
                                        ("2.0 GiB", 2 << 30), ("512kib", 512 << 10)])  # as sizes are printed
def test_sizes_read_with_binary_units(text, size):
    assert parse_size(text) == size


#: Run in a process of its own: a thread an earlier test of the same pytest worker left running (a server's, a task's)
#: reads $TESSERA_HOME, which this test sets, and could hold the same files open for a moment (7 files of 6 once, in
#: CI, where every held file was this test's).
RUNS_IN_A_FRESH_PROCESS = """
import gc, json, sys
from pathlib import Path
from flows.api import Flow
from tests.open_files import open_files

index, root, home, query = sys.argv[1:]
flow = Flow.load("bm25", index=index)
caches = (Path(root).resolve(), (Path(home) / "cache").resolve())
gc.disable()  # a connection let go is closed by this code, not by the cycle collector
flow.run(query, cache=root)
before = open_files(*caches)
for _ in range(30):
    flow.run(query, cache=True)  # the default folder ($TESSERA_HOME/cache), and this one
    flow.run(query, cache=root)
print(json.dumps({"before": before, "after": open_files(*caches)}))
"""


def closed_by_sqlite(held: list[str]) -> int:
    """How many of ``held`` are the database descriptors SQLite keeps for connections already closed: one closed
    while another connection of the process holds its lock on the same database (a POSIX lock is the process's, and
    closing any descriptor of the file drops it) leaves its descriptor open, for the next connection to reuse, so
    at most one per database. Each open connection has a ``-wal`` descriptor of its own; a closed one none."""
    databases = {path for path in held if path.endswith("index.sqlite")}
    return sum(min(1, max(0, held.count(path) - held.count(f"{path}-wal"))) for path in databases)


@pytest.mark.process
def test_runs_share_one_cache_and_leave_no_open_files_behind(filled, bm25_index, tmp_path):
    root = filled[1]
    done = subprocess.run([sys.executable, "-c", RUNS_IN_A_FRESH_PROCESS, str(bm25_index), str(root),
                           str(tmp_path / "home"), QUERIES[0]], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[2], env={**os.environ, "TESSERA_HOME": str(tmp_path / "home")})
    assert done.returncode == 0, done.stderr
    held = json.loads(done.stdout.splitlines()[-1])
    before, after = held["before"], held["after"]
    assert len(before) == 3, before  # this cache's database, its WAL and shared-memory files
    assert len(after) - closed_by_sqlite(after) <= len(before) + 3, after  # and the default cache's


def test_step_cache_takes_tessera_home_when_made(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "one"))
    assert StepCache().root == tmp_path / "one" / "cache"
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "two"))
    assert StepCache().root == tmp_path / "two" / "cache"
