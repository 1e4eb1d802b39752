"""The ingests running on an index now: each holds a shared lock on ``<index>/_ingest/running.lock`` while it runs.

A run that fails before its first commit removes the index folder it created (``job._Run._undo``), so a failed
check leaves nothing behind. But two ingests into a new index both created it, as far as either knows, and the
one that failed (a Ray that did not start in time) removed the folder the other was staging into and reading
from: the other failed too, its staged files gone under Ray's prepare stage. ``alone()`` tells whether another
ingest holds the lock, so the folder is removed only when no other ingest needs it. The last run to end removes the
lock file (and ``_ingest/`` when nothing else waits there); a run that opened the file just before that locks the
new one instead.

A run killed with SIGKILL (a cancelled upload's worker, which the service kills) never ends: its lock dies with its
process, but the file and ``_ingest/`` stay. That lock is stale, not wrong: the next run on the index locks that file,
and removes it when it ends alone. The service sweeps it when it knows the worker is gone (``idle``, ``sweep``), so an
index that keeps its documents does not keep the file until its next upload. A sweep takes the lock exclusively, so
it removes nothing a live run holds, and it removes the file the way the last run to end does.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Iterator

from flows.ingestion.staging import STAGING_DIR

LOCK_FILE = "running.lock"


class Running:
    """This run's shared lock on the index's ``running.lock``, from ``__enter__`` to ``__exit__``."""

    def __init__(self, index_path: Path):
        self.path = Path(index_path) / STAGING_DIR / LOCK_FILE
        self.fd: int | None = None

    def __enter__(self) -> "Running":
        while True:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = _open(self.path)
            if fd is None:
                continue  # the last run (or a sweep) removed ``_ingest/`` between the mkdir and the open
            fcntl.flock(fd, fcntl.LOCK_SH)
            if _same_file(fd, self.path):
                self.fd = fd
                return self
            os.close(fd)  # the last run removed it between the open and the lock: lock the file there now

    def __exit__(self, *exc) -> None:
        if self.fd is None:
            return
        if self.alone():  # the last one: nothing of the run stays (an interrupted run's staged shards do)
            _remove(self.path)
        os.close(self.fd)  # closing it gives the lock up
        self.fd = None

    def alone(self) -> bool:
        """Whether no other ingest holds the lock. Asking takes the lock exclusively (flock converts a lock by
        giving it up first), so ask only when this run is about to end."""
        if self.fd is None:
            return True
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


@contextlib.contextmanager
def idle(index_path: str | Path, wait_s: float = 0.0) -> Iterator[bool]:
    """Whether no ingest runs on the index (waiting up to ``wait_s`` for the lock to be free): True, and while the
    block runs no ingest starts there (each waits for its shared lock on the file the block holds exclusively, when
    there is an ``_ingest/``); at the end the lock file and an empty ``_ingest/`` are removed, a killed run's too.
    False when a live ingest holds the lock: it removes them when it ends, and the block must leave its staged files
    alone.

    The wait is for a killed process that Ray no longer lists but that has not exited yet (it may still write its
    staged shards): its lock is free only once it is gone. An index without ``_ingest/`` is idle, and none is made
    (a listing meanwhile would see it)."""
    path = Path(index_path) / STAGING_DIR / LOCK_FILE
    deadline = time.monotonic() + wait_s
    while True:
        if not path.parent.is_dir():
            yield True  # no ``_ingest/``: no run there (each makes it first), nothing staged to guard
            return
        fd = _open(path)
        if fd is None:
            continue  # the last run removed ``_ingest/`` since: look again
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            if time.monotonic() >= deadline:
                yield False
                return
            time.sleep(0.05)
            continue
        if _same_file(fd, path):
            break
        os.close(fd)  # the last run removed the file we locked (and another may hold the new one): look again
    try:
        yield True
    finally:
        _remove(path)  # held exclusively, so no run holds this file: a run waiting on it re-opens the new one
        os.close(fd)


def held(index_path: str | Path) -> bool | None:
    """Whether a live ingest runs on the index now (holds its ``running.lock``): False where none does (no lock file,
    or a free one: a run that was killed, or a folder copied while a run wrote it), None where this cannot be asked
    (a file it may not open). Makes and removes nothing: only a sweep (``idle``) removes a stale lock file. The
    exclusive lock it tries is given up at once; a run that starts meanwhile waits that long for its shared one."""
    path = Path(index_path) / STAGING_DIR / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # gives the lock up, if it was taken
    return False


def sweep(index_path: str | Path, wait_s: float = 0.0) -> bool:
    """Remove a stale ``running.lock`` (its run was killed) and an empty ``_ingest/``; True when no ingest held the
    lock (within ``wait_s``), False when a live one does (then nothing is touched)."""
    with idle(index_path, wait_s) as free:
        return free


def _open(path: Path) -> int | None:
    """The lock file, made if missing; None when its folder is gone (removed by the last run, or a sweep)."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except FileNotFoundError:
        return None


def _remove(path: Path) -> None:
    """Remove the lock file and its folder when that is empty; only by a holder of the exclusive lock."""
    with contextlib.suppress(OSError):
        path.unlink()
    with contextlib.suppress(OSError):
        path.parent.rmdir()  # only when empty


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
