"""What a disk that refused a write said, in words, for the one-line errors of the writers outside an index.

Why one place: a full disk, a quota and a file size limit reach a writer as an ``OSError`` (``[Errno 28]``, from
pyarrow often ``Error writing bytes to file`` and no file named) or as a library's own error that carries Rust's
``(os error 28)`` (safetensors' ``SafetensorError``), and ``tessera bench``, ``tessera train`` and ``tessera run
--out`` each said it as an internal error. They say it the same way from here, and the step cache, the service
and ``tessera keys`` tell a database's refusal by ``refused_by``; index writes have their own words
(``operators.store.disk``: what an ingestion resumes).
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
from pathlib import Path

from operators.byte_sizes import format_bytes

#: The errors of a disk that refuses a write, in words: full, over quota, past ``ulimit -f``.
REFUSED = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exceeded",
           errno.EFBIG: "a file would grow past this process's file size limit (`ulimit -f`)"}
#: PostgreSQL's SQLSTATE ``disk_full``.
PG_DISK_FULL = "53100"


def refused_by(err: BaseException | None) -> BaseException | None:
    """The disk's refusal in ``err``'s chain (its causes and contexts, one raised ``from None`` too, and the driver's
    error SQLAlchemy keeps as ``orig``), or None: an ``OSError`` of ``REFUSED``, a library's error carrying Rust's
    ``(os error N)``, SQLite's ``SQLITE_FULL`` or ``SQLITE_IOERR`` (a file size limit is an I/O error to it), or
    PostgreSQL's ``disk_full`` (SQLSTATE 53100)."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in REFUSED:
            return err
        if isinstance(err, sqlite3.Error):
            if str(getattr(err, "sqlite_errorname", "")).startswith(("SQLITE_FULL", "SQLITE_IOERR")):
                return err
        elif getattr(err, "sqlstate", None) == PG_DISK_FULL or any(f"(os error {n})" in str(err) for n in REFUSED):
            return err
        err = getattr(err, "orig", None) or err.__cause__ or err.__context__
    return None


def refusal(err: BaseException | None) -> str | None:
    """What the disk said, in words, where ``err``'s chain holds its refusal of a file's write (``refused_by``);
    else None (a database's refusal too: its callers say it in their words)."""
    refused = refused_by(err)
    if isinstance(refused, OSError):
        return REFUSED[refused.errno]
    return next((said for number, said in REFUSED.items() if f"(os error {number})" in str(refused)), None) \
        if refused is not None else None


def where(path: str | Path) -> str:
    """``the file system holding PATH, N free`` (the free space left out where it cannot be read), for a refusal's
    line: whether it is full, and how full."""
    existing = Path(os.path.abspath(path))
    while not existing.exists() and existing != existing.parent:  # a folder not made yet: the one it would be in
        existing = existing.parent
    try:
        return f"the file system holding {path}, {format_bytes(shutil.disk_usage(existing).free)} free"
    except OSError:
        return f"the file system holding {path}"
