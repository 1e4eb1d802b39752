"""A step cache that cannot be written still serves what it holds: a cache restored or shared read-only (a real
read-only bind mount, ``mount -o remount,bind,ro`` in a mount namespace of the test's own, as root; skipped where this
user may not make one) and one on a disk that refuses every write (a real file size limit of 0, ``ulimit -f 0``, in
the child) give the stored hits, the same rows as a writable cache, store nothing new, change none of its files, and
say so in one line. Before, a read-only cache was left off (every step computed again) and ``tessera cache info`` on
one whose database was closed cleanly stopped with ``internal error: OperationalError: unable to open database
file``; on a full disk a cache whose database was closed cleanly gave no hit at all (SQLite could not make its -shm
file)."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import resource
import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
READ_ONLY = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"'
STORED = ["gothic architecture cathedrals", "opera singers in Carmen"]
NEW = ["electric guitar", "fairy tales of the brothers Grimm"]

pytestmark = [pytest.mark.process,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a mount namespace, RLIMIT_FSIZE")]


def tessera(cache: Path, *args: str, read_only: bool = False, full: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "flows", *args]
    if read_only:
        command = ["unshare", "-m", "sh", "-c", READ_ONLY, str(cache), *command]
    env = {**os.environ, "TESSERA_HOME": str(cache.parent / "home"), "PYTHONPATH": str(REPO), "COLUMNS": "200"}
    env.pop("TESSERA_DEBUG", None)
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=REPO,
                          preexec_fn=_no_file_may_grow if full else None)


def _no_file_may_grow() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # every write of a byte: EFBIG


def search(index: Path, cache: Path, queries: list[str], **how: bool) -> subprocess.CompletedProcess:
    file = cache.parent / f"queries-{len(queries)}.jsonl"
    file.write_text("".join(json.dumps({"_id": f"q{i}", "text": q}) + "\n" for i, q in enumerate(queries)))
    return tessera(cache, "run", "bm25", "--index", str(index), "--queries", str(file), "--json", "--executor",
                   "local", "--cache-dir", str(cache), **how)


def files_of(cache: Path) -> dict[str, tuple[int, str]]:
    """Each file's size and content: what the cache holds, byte for byte."""
    return {str(p.relative_to(cache)): (p.stat().st_size, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(cache.rglob("*")) if p.is_file() and p.stat().st_size}


def close_cleanly(cache: Path) -> None:
    """As the last connection of a process that closes it: the -wal folded into the database, no -wal or -shm left."""
    with closing(sqlite3.connect(cache / "index.sqlite")) as conn:
        conn.execute("SELECT count(*) FROM units").fetchall()
    assert not (cache / "index.sqlite-wal").exists()


@pytest.fixture(scope="module")
def filled(bm25_index, tmp_path_factory) -> Path:
    """A cache that one run filled with the searches of ``STORED``, as that run left it (its -wal and -shm files)."""
    cache = tmp_path_factory.mktemp("filled") / "cache"
    first = search(bm25_index, cache, STORED)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["steps"]["bm25"]["hits"] == 0
    return cache


@pytest.fixture
def cache(filled, tmp_path) -> Path:
    """A copy of ``filled``, file for file, for the test to change: one run for the module, not one a test (a
    ``tessera run`` process each, a fifth of the module's CPU)."""
    return Path(shutil.copytree(filled, tmp_path / "cache"))


@pytest.fixture(scope="module")
def uncached_rows(bm25_index, tmp_path_factory) -> list:
    """The rows of the searches of ``STORED + NEW`` without a step cache (one run for the module)."""
    cache = tmp_path_factory.mktemp("uncached") / "cache"
    cache.parent.joinpath("queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": q}) + "\n" for i, q in enumerate(STORED + NEW)))
    plain = tessera(cache, "run", "bm25", "--index", str(bm25_index), "--queries", str(cache.parent / "queries.jsonl"),
                    "--json", "--no-cache")
    assert plain.returncode == 0, plain.stderr
    return json.loads(plain.stdout)["rows"]


@pytest.fixture
def read_only_mounts(tmp_path) -> None:
    """Skip where this user cannot make a read-only bind mount in a mount namespace of its own."""
    mount = ["unshare", "-m", "sh", "-c", READ_ONLY, str(tmp_path), "true"]
    if shutil.which("unshare") is None or subprocess.run(mount, capture_output=True).returncode != 0:
        pytest.skip("no read-only bind mount here")


def info_and_explain_answer(cache: Path, index: Path) -> None:
    """``tessera cache info`` and ``explain`` read the read-only ``cache`` (before: exit 1, internal error:
    OperationalError: unable to open database file)."""
    info = tessera(cache, "cache", "info", "--cache-dir", str(cache), "--json", read_only=True)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["units"] == 2
    explain = tessera(cache, "cache", "explain", "bm25", "--index", str(index), "--cache-dir", str(cache), "--json",
                      read_only=True)
    assert explain.returncode == 0, explain.stderr
    assert [s["last_run"] for s in json.loads(explain.stdout)["steps"]] == [{"units": 2, "hits": 0}], explain.stdout


def says_nothing_stored(result: dict, why: str, short: str) -> None:
    """The run's summary line and its JSON say that nothing was stored (before: ``cache hit ratio 50%`` alone, as a
    cache that stored the misses), and why."""
    assert result["cache_read_only"] == why and result["cache_hit_ratio"] == 0.5
    assert result["description"].endswith(f", cache hit ratio 50%, nothing stored ({short})"), result["description"]


def said(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("tessera:")]


@pytest.mark.parametrize("closed", [False, True], ids=["a-run-left-its-wal", "database-closed"])
def test_a_read_only_cache_serves_its_hits_and_stores_nothing(bm25_index, read_only_mounts, cache, closed,
                                                              uncached_rows):
    if closed:
        close_cleanly(cache)
    before = files_of(cache)
    done = search(bm25_index, cache, STORED + NEW, read_only=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["steps"]["bm25"]["hits"], result["steps"]["bm25"]["units"]) == (2, 4)  # was 0 of 0: cache off
    says_nothing_stored(result, "a read-only file system", "read-only")
    assert said(done) == [
        f"tessera: warning: the step cache {cache} cannot be written (a read-only file system): the run reads what is "
        "stored there and stores nothing new; pass --cache-dir DIR for a folder this user can write, or --no-cache"]
    assert result["rows"] == uncached_rows and result["rows"]
    assert files_of(cache) == before


def test_info_and_explain_read_a_read_only_cache_and_prune_is_refused_in_one_line(bm25_index, read_only_mounts,
                                                                                 cache):
    close_cleanly(cache)  # SQLite cannot make the -shm file it opens such a database with: "unable to open"
    before = files_of(cache)
    info_and_explain_answer(cache, bm25_index)
    prune = tessera(cache, "cache", "prune", "--older-than", "0", "--cache-dir", str(cache), read_only=True)
    assert prune.returncode == 2
    assert prune.stderr.strip().splitlines() == [
        f"tessera: error: field '--cache-dir': cannot prune {cache}: it cannot be written (a read-only file system); "
        "nothing was removed"]
    assert files_of(cache) == before


def test_a_read_only_cache_whose_wal_lost_its_shm_is_read_whole(bm25_index, read_only_mounts, cache):
    """A -wal file holding the entries and no -shm file (a backup or CI cache that left it out; no process has the
    database open): SQLite's read-only mode cannot open it there and immutable would not read the log. Before, the run
    said a second line and computed every step, and info and explain stopped with an internal error."""
    (cache / "index.sqlite-shm").unlink()  # what the run stored is in the -wal file alone
    assert (cache / "index.sqlite-wal").stat().st_size > 0
    before = files_of(cache)
    done = search(bm25_index, cache, STORED + NEW, read_only=True)
    assert done.returncode == 0, done.stderr
    assert [s["hits"] for s in json.loads(done.stdout)["steps"].values()] == [2], done.stdout  # was 0
    assert said(done) == [
        f"tessera: warning: the step cache {cache} cannot be written (a read-only file system): the run reads what is "
        "stored there and stores nothing new; pass --cache-dir DIR for a folder this user can write, or --no-cache"]
    info_and_explain_answer(cache, bm25_index)
    assert files_of(cache) == before and not (cache / "index.sqlite-shm").exists()


def test_a_cache_on_a_full_disk_serves_its_hits_and_stores_nothing(bm25_index, cache):
    close_cleanly(cache)  # no -shm file, which SQLite cannot make on this disk: no hit was served
    before = files_of(cache)
    done = search(bm25_index, cache, STORED + NEW, full=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["steps"]["bm25"]["hits"], result["steps"]["bm25"]["units"]) == (2, 4)  # was 0 of 4
    says_nothing_stored(result, result["cache_read_only"], "the disk refused a write")
    assert result["cache_read_only"].startswith("the disk refused a write: "), result["cache_read_only"]
    assert len(said(done)) == 1 and said(done)[0].startswith(
        f"tessera: warning: the step cache {cache} cannot be written (the disk refused a write: "), done.stderr
    assert said(done)[0].endswith("the run reads what is stored there and stores nothing new; free space there, or "
                                  "run with --no-cache")
    assert files_of(cache) == before
    again = search(bm25_index, cache, STORED + NEW)  # room again: the same rows, the new searches stored this time
    assert again.returncode == 0 and not said(again), again.stderr
    assert json.loads(again.stdout)["rows"] == result["rows"] and result["rows"]
    assert json.loads(again.stdout)["steps"]["bm25"]["hits"] == 2
    assert json.loads(again.stdout)["cache_read_only"] is None
    assert json.loads(again.stdout)["description"].endswith(", cache hit ratio 50%"), again.stdout
    assert json.loads(search(bm25_index, cache, STORED + NEW).stdout)["steps"]["bm25"]["hits"] == 4


TWO_RUNS = """
import json, resource, sys
from flows.api import Flow

flow = Flow.load("bm25", index=sys.argv[1])
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
for n in range(2):
    result = flow.run(json.loads(sys.argv[3]), cache=sys.argv[2])
    print(json.dumps([result.steps["bm25"].hits, result.steps["bm25"].units, result.description().split(", ")[-2:],
                      result.cache_read_only.split(":")[0]]), flush=True)
"""


def test_each_run_of_a_process_serves_the_hits_and_says_it_once(bm25_index, cache):
    """The Python API keeps its step cache between runs: each run says once that it stores nothing (the second run
    said nothing, as if it stored), and each serves the stored hits."""
    close_cleanly(cache)
    env = {**os.environ, "TESSERA_HOME": str(cache.parent / "home"), "PYTHONPATH": str(REPO)}
    queries = json.dumps({f"q{i}": q for i, q in enumerate(STORED + NEW)})  # the qids the CLI's run stored
    done = subprocess.run([sys.executable, "-c", TWO_RUNS, str(bm25_index), str(cache), queries], capture_output=True,
                          text=True, timeout=300, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        [2, 4, ["cache hit ratio 50%", "nothing stored (the disk refused a write)"], "the disk refused a write"]] * 2
    assert done.stderr.count(f"the step cache {cache} cannot be written (") == 2, done.stderr


def test_a_worker_is_given_what_the_run_may_do_and_does_not_say_it_again(tmp_path, caplog):
    """A Ray worker gets the step cache pickled: it reads, stores nothing, and says nothing the driver said."""
    from flows.cache import StepCache

    cache = StepCache(tmp_path / "cache")
    cache.stop_storing("a read-only file system", "pass --cache-dir DIR")
    caplog.clear()
    worker = pickle.loads(pickle.dumps(cache))
    assert worker.read_only() == "a read-only file system"
    worker.put([(b"k" * 16, None, {"x": 1})])
    assert not (tmp_path / "cache").exists() and not caplog.records
