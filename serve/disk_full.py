"""Whether a request failed because the server's disk refused to store it (full, over quota, a file size limit):
``serve.errors.insufficient_storage`` answers it with a 507 that says so.

Before, a task enqueued, a chat started, a flow saved, a key revoked or documents uploaded on a full disk was a 500
``internal_error`` ("the details are in the server log"): the client could not tell a full disk, which its operator
frees and the same request then succeeds, from a bug. Every such write is all-or-nothing (a task store transaction
rolls back; a file is written under a temporary name and renamed, or removed when refused: serve/index_uploads.py),
so the answer can say nothing of the request was kept and what was stored before is as it was. The message names
what could not be written (the task store, or a file of the service) without the server's paths; the log has them.
"""

from __future__ import annotations

import errno
import sqlite3

#: A file the disk would not let grow: full, over quota, past ``ulimit -f``.
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
#: PostgreSQL's ``disk_full`` (SQLSTATE 53100).
_PG_DISK_FULL = "53100"


def _refusal(err: BaseException) -> BaseException | None:
    """The disk's refusal in ``err``'s chain (its causes and contexts, also one raised ``from None``), or None."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in _FULL_ERRNOS:
            return err
        if isinstance(err, sqlite3.Error) and str(getattr(err, "sqlite_errorname", "")).startswith(
                ("SQLITE_FULL", "SQLITE_IOERR")):  # a file size limit is an I/O error to SQLite
            return err
        if getattr(err, "sqlstate", None) == _PG_DISK_FULL:
            return err
        err = getattr(err, "orig", None) or err.__cause__ or err.__context__  # sqlalchemy keeps the driver's as orig
    return None


def refused_write(err: BaseException) -> tuple[str, BaseException] | None:
    """What the disk refused to let be written, in words for a client ("the task store", "a file of the service"),
    and the error in ``err``'s chain that says so; None for any other failure (``serve.errors`` answers it 507)."""
    refused = _refusal(err)
    if refused is None:
        return None
    database = isinstance(refused, sqlite3.Error) or type(refused).__module__.startswith("psycopg")
    return ("the task store" if database else "a file of the service"), refused
