"""The lock that tells an ingest whether another one runs on its index (``flows.ingestion.running``): the last run to
end removes it, so a finished or cancelled ingest leaves no ``_ingest/`` behind (the service's cancelled upload left
``_ingest/running.lock``), and a run that opened the file just before it was removed locks the new one. A run killed
with SIGKILL (the service kills a cancelled upload's worker) leaves the file: a sweep removes it once no live run holds
the lock, and never one a live run holds."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from flows.ingestion import ingest
from flows.ingestion.running import LOCK_FILE, Running, idle, sweep
from flows.ingestion.staging import STAGING_DIR

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample" / "corpus.jsonl"


def test_the_last_run_to_end_removes_the_lock_and_an_empty_staging_folder(tmp_path):
    lock = tmp_path / STAGING_DIR / LOCK_FILE
    with Running(tmp_path):
        with Running(tmp_path):
            pass
        assert lock.exists()  # the first run still holds it
    assert not (tmp_path / STAGING_DIR).exists()

    staged = tmp_path / STAGING_DIR / "source" / "shard-00000.parquet"  # an interrupted run's, kept for its resume
    staged.parent.mkdir(parents=True)
    staged.write_bytes(b"")
    with Running(tmp_path):
        pass
    assert not lock.exists() and staged.exists()


def test_a_run_that_opened_the_file_before_the_last_one_removed_it_locks_the_new_file(tmp_path):
    lock = tmp_path / STAGING_DIR / LOCK_FILE
    ending = Running(tmp_path).__enter__()
    assert ending.alone()  # now held exclusively: the next run's shared lock waits on this file
    entered: list[Running] = []
    waiting = threading.Thread(target=lambda: entered.append(Running(tmp_path).__enter__()), daemon=True)
    waiting.start()
    time.sleep(0.3)  # the thread opens the old file and waits for its lock (sooner or later, the result is the same)
    ending.__exit__(None, None, None)  # removes the file, then gives its lock up
    waiting.join(10)
    assert entered, "the waiting run never took the lock"
    held = os.fstat(entered[0].fd)
    assert held.st_nlink == 1 and os.stat(lock).st_ino == held.st_ino  # the file there, not the removed one
    entered[0].__exit__(None, None, None)
    assert not lock.exists()


def test_an_ingest_leaves_no_lock_behind(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:20]), encoding="utf-8")
    report = ingest(path, tmp_path / "idx", settings={"dense": False}, shard_size=8, executor="local", progress=False)
    assert report.docs == 20
    assert not (tmp_path / "idx" / STAGING_DIR / LOCK_FILE).exists()  # the source's job.json stays, for a resume


# -- a run killed with SIGKILL (a cancelled upload's worker): its lock file stays until a sweep ---------------------

REPO = Path(__file__).resolve().parents[2]
HOLD = ("import sys\nfrom flows.ingestion.running import Running\nrun = Running(sys.argv[1]).__enter__()\n"
        "print('held', flush=True)\nsys.stdin.read()\nrun.__exit__(None, None, None)\n")


@contextlib.contextmanager
def holding(index: Path):
    """Another process inside ``Running`` on ``index`` (an ingest running there), until it is killed or told to end
    (its stdin closed)."""
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(index)], cwd=REPO, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline() == "held\n"
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)
        process.stdin.close()
        process.stdout.close()


def killed(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    assert process.wait(30) == -signal.SIGKILL


@pytest.mark.process
def test_a_sweep_removes_the_lock_a_killed_run_left_and_an_empty_staging_folder(tmp_path):
    lock = tmp_path / STAGING_DIR / LOCK_FILE
    with holding(tmp_path) as process:
        killed(process)
    assert lock.exists()  # its Running never ended
    assert sweep(tmp_path)
    assert not (tmp_path / STAGING_DIR).exists()

    staged = tmp_path / STAGING_DIR / "source" / "shard-00000.parquet"  # kept for a resume
    with holding(tmp_path) as process:
        staged.parent.mkdir()
        staged.write_bytes(b"")
        killed(process)
    assert sweep(tmp_path)
    assert not lock.exists() and staged.exists()


@pytest.mark.process
def test_a_sweep_leaves_the_lock_of_a_live_run_which_removes_it_when_it_ends(tmp_path):
    lock = tmp_path / STAGING_DIR / LOCK_FILE
    with holding(tmp_path) as process:
        started = time.monotonic()
        assert not sweep(tmp_path, wait_s=0.1)
        assert time.monotonic() - started >= 0.1  # it waited for the lock
        assert lock.exists()
        with Running(tmp_path) as running:  # a run starting now shares the live run's lock file
            assert os.fstat(running.fd).st_ino == os.stat(lock).st_ino and not running.alone()
        assert lock.exists()
        process.stdin.close()  # the live run ends, the last one
        assert process.wait(30) == 0
    assert not (tmp_path / STAGING_DIR).exists()


@pytest.mark.process
def test_a_sweep_waits_for_a_killed_process_to_exit(tmp_path):
    """Ray stops listing a killed worker before its process exits: the sweep waits for the lock to be free."""
    with holding(tmp_path) as process:
        swept: list[bool] = []
        sweeping = threading.Thread(target=lambda: swept.append(sweep(tmp_path, wait_s=30)), daemon=True)
        sweeping.start()
        time.sleep(0.3)
        assert not swept  # still waiting: the process holds the lock
        killed(process)
        sweeping.join(30)
    assert swept == [True] and not (tmp_path / STAGING_DIR).exists()


def test_no_run_starts_while_an_idle_block_runs_and_the_next_one_locks_a_new_file(tmp_path):
    lock = tmp_path / STAGING_DIR / LOCK_FILE
    lock.parent.mkdir()  # staged files there, say: the block removes them while no run may start
    entered: list[Running] = []
    with idle(tmp_path) as free:
        assert free
        waiting = threading.Thread(target=lambda: entered.append(Running(tmp_path).__enter__()), daemon=True)
        waiting.start()
        time.sleep(0.3)
        assert not entered  # it waits for its shared lock on the file the block holds exclusively
    waiting.join(10)
    assert entered, "the waiting run never took the lock"
    held = os.fstat(entered[0].fd)
    assert os.stat(lock).st_ino == held.st_ino and held.st_nlink == 1  # the file there, not the swept one
    assert not sweep(tmp_path)  # the new file's lock is live
    entered[0].__exit__(None, None, None)
    assert not (tmp_path / STAGING_DIR).exists()


def test_a_sweep_makes_no_folder(tmp_path):
    assert sweep(tmp_path / "gone")
    assert not (tmp_path / "gone").exists()
    assert sweep(tmp_path)  # an index without _ingest/: none appears, not even for a moment (a listing may look)
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_that_opened_the_file_the_last_run_then_removed_leaves_the_next_runs_lock(tmp_path, monkeypatch):
    """The race ``Running.__enter__`` handles, met by a sweep: it opens the file, the last run ends (removing it) and
    a new run locks a new file before the sweep locks the one it opened. The interleaving is forced by running those
    two real steps right after the sweep's real open."""
    from flows.ingestion import running as module

    lock = tmp_path / STAGING_DIR / LOCK_FILE
    ending, started = Running(tmp_path).__enter__(), []
    real_open = module._open

    def open_then_let_the_last_run_end(path: Path) -> int | None:
        fd = real_open(path)
        if ending.fd is not None:  # the sweep's first open (the new run opens through here too)
            ending.__exit__(None, None, None)
            started.append(Running(tmp_path).__enter__())
        return fd

    monkeypatch.setattr(module, "_open", open_then_let_the_last_run_end)
    assert not sweep(tmp_path)  # what it locked was the removed file; the one there is the new run's
    assert os.stat(lock).st_ino == os.fstat(started[0].fd).st_ino
    started[0].__exit__(None, None, None)
    assert not (tmp_path / STAGING_DIR).exists()
