"""Who holds an index's ``.lock``, said when a writer has to wait for it.

The lock is a ``flock``: a holder that dies gives it up with its process, so a stale ``.lock`` file never blocks.
A live holder does (``tessera index compact`` on a large index, a writer stuck in a hung process), and a writer
waiting behind it, an ingest about to commit say, used to sit without a word, its progress stopped. A writer that
still waits after ``NOTICE_S`` seconds now says once which process it waits for (Linux's ``/proc/locks`` names the
holder; the file itself stays empty), then goes on waiting: taking the lock from a live writer would break the index.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from pathlib import Path

log = logging.getLogger("tessera.store")

#: Seconds of waiting before the wait is said: commits take milliseconds, so two writers taking turns say nothing.
NOTICE_S = 2.0


def holder(lock_file: Path) -> str:
    """``pid N (its command line)`` of the process holding the lock, from Linux's ``/proc/locks`` (the file's
    inode); ``another process`` where that cannot be told (another system, or the holder ended meanwhile)."""
    try:
        inode = os.stat(lock_file).st_ino
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            pid = next(int(fields[4]) for fields in map(str.split, locks)
                       if len(fields) > 5 and fields[1] == "FLOCK" and fields[3] == "WRITE"
                       and fields[5].rsplit(":", 1)[-1] == str(inode))
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            command = file.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except (OSError, ValueError, StopIteration):
        return "another process"
    shown = command if len(command) <= 120 else command[:117] + "..."
    return f"pid {pid} ({shown})" if shown else f"pid {pid}"


@contextlib.contextmanager
def notice_if_waiting(index_path: Path, lock_file: Path):
    """Around a blocking ``flock``: a warning naming the holder if it has not returned after ``NOTICE_S``."""
    def say() -> None:
        log.warning("waiting for the lock of the index %s: %s is writing to it; this goes on once it is done "
                    "(Ctrl-C stops this command, and what it committed stays)", index_path, holder(lock_file))

    timer = threading.Timer(NOTICE_S, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
