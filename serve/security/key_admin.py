"""Revoking a key over HTTP, for an admin key (``api_keys: [{id, sha256, admin: true}]``): ``GET /v1/admin/keys``
lists the service's keys by id with their revocations, ``POST /v1/admin/keys/{key_id}/revoke`` revokes the key that
has the id now (its hash, ``flows.key_revocations``), which every replica refuses within ``REVOCATION_CACHE_S``
and this one at once. Any other key gets a 403.

There is no un-revoking over HTTP: whoever holds a leaked admin key could otherwise let a revoked key in again,
its own included. ``tessera keys unrevoke``, run where the task store is reached, undoes a revocation.
"""

from __future__ import annotations

from typing import Any

from flows.key_revocations import revocation, revoke, revoked_hashes, revoked_rows
from serve.security import auth
from serve.http.errors import ApiError
from serve.indices.index_admin import require_admin

WHAT = "list or revoke the service's keys"


def listing(service: Any, tenant: str) -> list[dict[str, Any]]:
    """Each key of the service by id (no hash), whether it is an admin's, and its revocation if any."""
    require_admin(service, tenant, WHAT)
    with service.store.engine.connect() as conn:
        revoked = {row["sha256"]: row for row in revoked_rows(conn)}
    keys = sorted(auth.key_ids().items(), key=lambda item: item[1])
    return [{"id": key_id, "admin": key_id in service.admins, "revoked": digest in revoked,
             "revoked_at": revoked[digest]["revoked"] if digest in revoked else None,
             "revoked_by": revoked[digest]["by"] if digest in revoked else None} for digest, key_id in keys]


def revoke_id(service: Any, key_id: str, tenant: str) -> dict[str, Any]:
    """Revoke the key that has ``key_id`` (404 for an id no key has); ``changed`` False when it was revoked already.
    ``admins_left``: the admin keys not revoked, 0 when this was the last (done all the same: a leaked admin key must
    go; ``/v1/admin`` then refuses every key until one is served again)."""
    require_admin(service, tenant, WHAT)
    keys = auth.key_ids()
    digest = next((digest for digest, known in keys.items() if known == key_id), None)
    if digest is None:
        raise ApiError(404, f"no key of this service has the id '{key_id}' (GET /v1/admin/keys lists them)",
                       param="key_id", code="key_not_found")
    written = revoke(service.store.engine, digest, key_id, f"admin key '{tenant}'")
    service.revocations.forget()  # this replica refuses it from the next request
    with service.store.engine.connect() as conn:
        row = written or revocation(conn, digest)
        revoked = revoked_hashes(conn)
    admins_left = sum(1 for known, kid in keys.items() if kid in service.admins and known not in revoked)
    return {"id": key_id, "revoked": True, "changed": written is not None,
            "revoked_at": row["revoked"], "revoked_by": row["by"], "admins_left": admins_left}
