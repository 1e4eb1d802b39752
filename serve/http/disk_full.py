"""Whether a request failed because the server's disk refused to store it (full, over quota, a file size limit):
``serve.http.errors.insufficient_storage`` answers it with a 507 that says so.

Before, a task enqueued, a chat started, a flow saved, a key revoked or documents uploaded on a full disk was a 500
``internal_error`` ("the details are in the server log"): the client could not tell a full disk, which its operator
frees and the same request then succeeds, from a bug. Every such write is all-or-nothing (a task store transaction
rolls back; a file is written under a temporary name and renamed, or removed when refused:
serve/indices/index_uploads.py), so the answer can say nothing of the request was kept and what was stored before is
as it was. The message names what could not be written (the task store, or a file of the service) without the
server's paths; the log has them.
"""

from __future__ import annotations

import sqlite3

from operators.disk_refusal import refused_by


def not_written(where: str) -> str:
    """How a client is told that ``where`` (``refused_write``'s words) could not be written, and why."""
    return f"{where} could not be written (the server's disk is full, or at a quota or file size limit)"


def refused_write(err: BaseException) -> tuple[str, BaseException] | None:
    """What the disk refused to let be written, in words for a client ("the task store", "a file of the service"),
    and the error in ``err``'s chain that says so; None for any other failure (``serve.http.errors`` answers it 507)."""
    refused = refused_by(err)
    if refused is None:
        return None
    database = isinstance(refused, sqlite3.Error) or type(refused).__module__.startswith("psycopg")
    return ("the task store" if database else "a file of the service"), refused
