"""The ingests running on an index now: each holds a shared lock on ``<index>/_ingest/running.lock`` while it runs.

A run that fails before its first commit removes the index folder it created (``job._Run._undo``), so a failed
check leaves nothing behind. But two ingests into a new index both created it, as far as either knows, and the
one that failed (a Ray that did not start in time) removed the folder the other was staging into and reading
from: the other failed too, its staged files gone under Ray's prepare stage. ``alone()`` tells whether another
ingest holds the lock, so the folder is removed only when no other ingest needs it.
"""

from __future__ import annotations

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
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_SH)
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
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
