"""The ingests running on an index now: each holds a shared lock on ``<index>/_ingest/running.lock`` while it runs.

A run that fails before its first commit removes the index folder it created (``job._Run._undo``), so a failed
check leaves nothing behind. But two ingests into a new index both created it, as far as either knows, and the
one that failed (a Ray that did not start in time) removed the folder the other was staging into and reading
from: the other failed too, its staged files gone under Ray's prepare stage. ``alone()`` tells whether another
ingest holds the lock, so the folder is removed only when no other ingest needs it. The last run to end removes the
lock file (and ``_ingest/`` when nothing else waits there); a run that opened the file just before that locks the
new one instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

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
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_SH)
            if _same_file(fd, self.path):
                self.fd = fd
                return self
            os.close(fd)  # the last run removed it between the open and the lock: lock the file there now

    def __exit__(self, *exc) -> None:
        if self.fd is None:
            return
        if self.alone():  # the last one: nothing of the run stays (an interrupted run's staged shards do)
            with contextlib.suppress(OSError):
                self.path.unlink()
            with contextlib.suppress(OSError):
                self.path.parent.rmdir()  # only when empty
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


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False
