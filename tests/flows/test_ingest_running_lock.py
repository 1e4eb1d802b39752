"""The lock that tells an ingest whether another one runs on its index (``flows.ingestion.running``): the last run to
end removes it, so a finished or cancelled ingest leaves no ``_ingest/`` behind (the service's cancelled upload left
``_ingest/running.lock``), and a run that opened the file just before it was removed locks the new one."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from flows.ingestion import ingest
from flows.ingestion.running import LOCK_FILE, Running
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
