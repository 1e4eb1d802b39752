"""Temporary copies left by writers killed outright, told apart from those a live writer still fills.

Tessera's writers fill a temporary name, rename it into place, and remove it when they fail; a writer killed
outright (SIGKILL, the OOM killer, a lost node) cannot, and its temporary stays, unread but holding disk. Two rules
tell a dead writer's temporary from a live one's; a sweep removes one only when its rule says the writer is gone:

* **Lock**: a writer that makes a temporary folder holds an exclusive ``flock`` on ``<temporary>.lock`` beside it
  while it fills it (``WriterLock``). The OS gives a lock up when its process dies, however it dies, so a sweep that
  takes the lock itself knows the writer is gone at once (the index's ``.lock`` and the ingests' ``running.lock``
  work the same way).
* **Age and pid**: a temporary without a lock (one made before the lock, an ONNX export's partial file) is stale only
  once nothing in it changed for ``GRACE_S`` (an hour, the index's grace for uncommitted shards), and, where its name
  carries its writer's pid, no process of that pid runs on this machine (a folder shared with other machines relies
  on the age).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from pathlib import Path

#: How long a temporary without a lock must be left unchanged before a sweep takes it for a dead writer's.
GRACE_S = 3600
LOCK_SUFFIX = ".lock"


def lock_path(temporary: Path) -> Path:
    return temporary.with_name(temporary.name + LOCK_SUFFIX)


class WriterLock:
    """This process's exclusive lock on ``<temporary>.lock`` while it fills ``temporary``. Take it before making
    ``temporary``; release it once ``temporary`` is renamed into place or removed (the lock file goes too)."""

    def __init__(self, temporary: Path) -> None:
        self.path = lock_path(Path(temporary))
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)  # a new random name: free at once, or once a sweep that took it is done
            if _same_file(fd, self.path):
                self.fd: int | None = fd
                return
            os.close(fd)  # a sweep took the new file for a dead writer's and removed it: lock the one there now

    def release(self) -> None:
        if self.fd is None:
            return
        self.path.unlink(missing_ok=True)  # before the lock goes: a sweep never finds it free with the file there
        os.close(self.fd)
        self.fd = None

    def __enter__(self) -> "WriterLock":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


FREE = "its writer's lock is free: the writer is gone"


def abandoned(temporary: Path, *, pid: int | None = None, grace_s: float = GRACE_S,
              remove_it: bool = False) -> str | None:
    """Why ``temporary`` (a folder or a file) was left by a writer that is gone, or None when it may be a live
    writer's (see the module docstring); ``pid``: the writer's, when its name says. ``remove_it``: remove it (and
    its lock file) when it was, still holding its lock, so that no writer takes that lock meanwhile."""
    try:
        fd = os.open(lock_path(temporary), os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        fd = None
    if fd is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None  # its writer holds it
        else:
            if not _same_file(fd, lock_path(temporary)):
                return None  # its writer finished as it was opened (and a new write of that name may have begun)
            if remove_it:
                remove(temporary)
            return FREE
        finally:
            os.close(fd)
    why = _unchanged_and_gone(temporary, pid, grace_s)
    if why is not None and remove_it:
        remove(temporary)
    return why


def _unchanged_and_gone(temporary: Path, pid: int | None, grace_s: float) -> str | None:
    changed = last_change(temporary)
    if changed is None or time.time() - changed < grace_s:
        return None
    if pid is not None and running(pid):
        return None
    return f"unchanged since {utc_minute(changed)}" + (f"; its writer (pid {pid}) is gone" if pid is not None else "")


def utc_minute(seconds: float) -> str:
    """``2026-12-07 13:45 UTC``: a file's time as ``tessera cache`` and ``tessera keys`` say theirs. The machine's own
    zone, unnamed, read an hour or 13:45 apart from one machine (or a DST change) to the next."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(seconds))


def remove_abandoned_in(folder: Path, prefix: str) -> list[str]:
    """Remove the temporaries named ``<prefix>...`` in ``folder`` whose writer's lock is free, with their lock files
    (at once, whatever their age); returns their names. Those without a lock file are left to the caller's rules."""
    try:
        names = {name.removesuffix(LOCK_SUFFIX) for name in os.listdir(folder)
                 if name.startswith(prefix) and name.endswith(LOCK_SUFFIX)}
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(name for name in names if abandoned(Path(folder) / name, grace_s=float("inf"), remove_it=True))


def remove(temporary: Path) -> None:
    """Remove an abandoned temporary and its lock file."""
    if temporary.is_dir() and not temporary.is_symlink():
        shutil.rmtree(temporary, ignore_errors=True)
    else:
        temporary.unlink(missing_ok=True)
    lock_path(temporary).unlink(missing_ok=True)


def last_change(path: Path) -> float | None:
    """The latest modification time of ``path`` and, for a folder, of everything in it (None: it is gone)."""
    try:
        latest = path.lstat().st_mtime
    except FileNotFoundError:
        return None
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for name in dirs + files:
                try:
                    latest = max(latest, os.lstat(os.path.join(root, name)).st_mtime)
                except FileNotFoundError:
                    continue
    return latest


def running(pid: int) -> bool:
    """Whether a process ``pid`` runs on this machine (one of another user's counts)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OverflowError, ValueError):
        return False
    return True
