"""Revoked API keys: a table of the task store that ``tessera keys revoke`` writes and every replica of the service
reads (``serve.security.revocations``), so a leaked key is refused within seconds everywhere, without a restart.

A revocation names a key by its SHA-256, not by its id: a key's id owns its data, and the key that replaces a leaked
one is given the same id (``tessera keys new --id ID``), so revoking the id would lock the replacement out too. The
row keeps the id the key had, when, and who revoked it.

Why in ``flows``: the command line writes the table and never imports the ``serve`` package; the service's store
(``serve.tasks.taskstore_db``) makes the table from here, beside its own.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

#: Seconds a replica of the service trusts the revocations it read (``serve.security.revocations``): a key revoked
#: anywhere is refused everywhere within them.
REVOCATION_CACHE_S = 5.0

metadata = sa.MetaData()

revoked_keys = sa.Table(
    "revoked_keys", metadata,
    sa.Column("sha256", sa.String(64), primary_key=True),  # the key's SHA-256 (hex), as api_keys holds it
    sa.Column("key_id", sa.String(64), nullable=False),     # the id it had when revoked
    sa.Column("revoked", sa.Float, nullable=False),         # when (epoch seconds)
    sa.Column("by", sa.String(200), nullable=False),        # who: "cli user@host", "admin key 'ops'"
)


def make_table(engine: sa.Engine) -> None:
    """The table, where a store made before it lacks it (``create_all`` makes missing tables only)."""
    metadata.create_all(engine)


def revoke(engine: sa.Engine, digest: str, key_id: str, by: str) -> dict[str, Any] | None:
    """Revoke the key whose hash is ``digest``; None when it was revoked already (its first row is kept, the one
    returned otherwise). One INSERT, no read before it: a SQLite transaction that reads, then writes, fails at once
    when another process wrote in between, where a write first waits for the lock."""
    row = {"sha256": digest, "key_id": key_id, "revoked": time.time(), "by": by[:200]}
    try:
        with engine.begin() as conn:
            conn.execute(revoked_keys.insert().values(**row))
    except sa.exc.IntegrityError:  # its row is there
        return None
    return row


def revocation(conn: Any, digest: str) -> dict[str, Any] | None:
    """The revocation of the key with hash ``digest``, or None."""
    row = conn.execute(sa.select(revoked_keys).where(revoked_keys.c.sha256 == digest)).mappings().first()
    return dict(row) if row else None


def unrevoke(engine: sa.Engine, digest: str) -> bool:
    """Let the key with hash ``digest`` in again; False when it was not revoked."""
    with engine.begin() as conn:
        return conn.execute(revoked_keys.delete().where(revoked_keys.c.sha256 == digest)).rowcount == 1


def revoked_rows(conn: Any) -> list[dict[str, Any]]:
    """Every revocation, oldest first."""
    query = sa.select(revoked_keys).order_by(revoked_keys.c.revoked, revoked_keys.c.sha256)
    return [dict(row) for row in conn.execute(query).mappings()]


def revoked_hashes(conn: Any) -> frozenset[str]:
    """The hashes of the revoked keys: what a replica checks each request's key against."""
    return frozenset(conn.execute(sa.select(revoked_keys.c.sha256)).scalars())
