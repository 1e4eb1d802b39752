"""Which API keys are revoked, as this replica last read them from the task store (``flows.key_revocations``).

Every replica shares the task store, so a revocation written anywhere (``tessera keys revoke``, an admin key's
``POST /v1/admin/keys/{id}/revoke`` on any replica) reaches them all through it. A replica reads the table again at
most every ``REVOCATION_CACHE_S`` seconds, on a worker thread, so a revoked key is refused everywhere within that
time (and the one read it takes: the requests that come during it use the list read before), and a request costs no
query.

Fail closed: while the table cannot be read (the database is down, a partition cuts this replica off), a request with
a key gets a 503 rather than the benefit of the doubt: a revocation is what stops a leaked key, and a replica that
let keys in whenever the store failed would let a revoked key back in by the outage. It costs little more than the
outage does already: tasks, chats and indices need the store anyway, and ``/healthz`` says ``task_store`` is down.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time

import sqlalchemy as sa

from flows.key_revocations import REVOCATION_CACHE_S, revoked_hashes
from flows.task_store_check import driver_error
from serve.tasks.taskstore_db import READ_ONLY

log = logging.getLogger("tessera.serve")

class RevocationsUnreadable(Exception):
    """The revoked keys could not be read: no key is accepted until they can."""


class Revocations:
    """The revoked keys' hashes of one task store, read again once ``ttl`` seconds old."""

    def __init__(self, engine: sa.Engine, ttl: float = REVOCATION_CACHE_S) -> None:
        self.engine, self.ttl = engine, ttl
        self._lock = threading.Lock()  # one read at a time
        self._state: tuple[frozenset[str], str | None] = (frozenset(), None)  # (hashes, why unreadable)
        self._read_at = -math.inf
        self.refresh()

    def stale(self) -> bool:
        return time.monotonic() - self._read_at >= self.ttl

    def refresh(self) -> None:
        """Read the table again if no other thread did while this one waited; a failure is kept for ``ttl`` too, so an
        outage costs one attempt per ``ttl``, not one per request."""
        with self._lock:
            if not self.stale():
                return
            try:
                with self.engine.execution_options(**{READ_ONLY: True}).connect() as conn:
                    self._state = (revoked_hashes(conn), None)
            except (sa.exc.SQLAlchemyError, OSError) as err:
                problem = driver_error(err, 300)
                if self._state[1] is None:
                    log.warning("the revoked API keys cannot be read from the task store: every request with a key "
                                "is refused (503) until they can: %s", problem)
                self._state = (self._state[0], problem)
            self._read_at = time.monotonic()

    def forget(self) -> None:
        """Read the table at the next check (this replica has just written it)."""
        self._read_at = -math.inf

    async def is_revoked(self, digest: str) -> bool:
        """Whether the key with hash ``digest`` is revoked; ``RevocationsUnreadable`` while that cannot be told."""
        if self.stale() and not self._lock.locked():  # one request reads; those during its read use the list read
            await asyncio.to_thread(self.refresh)  # before, rather than a thread each waiting on a slow database
        hashes, problem = self._state
        if problem is not None:
            raise RevocationsUnreadable(problem)
        return digest in hashes
