"""Indices for an admin key (``api_keys: [{id, sha256, admin: true}]``): every index the service made, whoever owns
it, deleting and compacting any of them.

A key that is removed from the configuration leaves its indices behind: private to an id nobody has, their names
taken and their disk in use, and no other key may change them. An admin key lists them with their owners
(``GET /v1/admin/indices``) and deletes them (``DELETE /v1/admin/indices/{name}``), as their owner would. It also
compacts any of them (``POST /v1/admin/indices/{name}/compact``): every upload adds a shard, and an index of many
small shards loads and searches slower, and rewrites a bigger manifest on each commit. Any other key gets a 403.
Indices the service did not make (the default index, one ``tessera ingest`` built) are not listed and stay read-only
here.
"""

from __future__ import annotations

from typing import Any

from serve.errors import ApiError
from serve.index_owner import OWNER_FILE, read_owner
from serve.indices import EMPTY, describe
from serve.ingest_task import compact_index
from serve.taskstore import UNFINISHED


def require_admin(service: Any, tenant: str) -> None:
    if tenant not in service.admins:  # the key ids with api_keys' admin: true
        raise ApiError(403, "only an admin key (api_keys: admin: true) may list, compact or delete every key's indices",
                       code="admin_only")


def every_index(indices: Any, tenant: str) -> list[dict[str, Any]]:
    """Every index the service made (a task store row, or an owner file whose row is gone), with its owner."""
    require_admin(indices.service, tenant)
    rows = dict(indices.service.store.indices_made())
    if indices.folder.is_dir():
        for owned in sorted(indices.folder.glob(f"*/{OWNER_FILE}")):
            if owned.parent.name not in rows and not owned.parent.name.startswith("."):
                rows[owned.parent.name] = read_owner(owned.parent)
    return [{"name": name, "owner": row["owner"], "shared": bool(row["shared"]), "spec": row["spec"],
             "created": row["created"], "ingest_task": row["ingest_task"],
             **(describe(indices.folder / name) or EMPTY)} for name, row in sorted(rows.items())]


def made_index(indices: Any, name: str, tenant: str) -> tuple[Any, dict[str, Any]]:
    """The folder and owner record of the index ``name`` the service made, for an admin key (403 for others, 404
    for a name the service did not make)."""
    require_admin(indices.service, tenant)
    path, row = indices.named(name)
    row = row or read_owner(path)
    if row is None:
        raise ApiError(404, f"no index named '{name}' made through this service", param="name",
                       code="index_not_found")
    return path, row


def delete_any(indices: Any, name: str, tenant: str) -> dict[str, Any]:
    """Delete the index ``name`` the service made, whoever owns it (a 409 while an ingestion runs into it)."""
    _, row = made_index(indices, name, tenant)
    return {**indices.remove(name, row["owner"]), "owner": row["owner"]}


def compact_any(indices: Any, name: str, tenant: str) -> dict[str, Any]:
    """Compact the index ``name`` the service made, whoever owns it: what it did (shards before and after, live
    chunks, seconds). A 409 while an ingestion runs into it: its commit would make the compaction redo its merge,
    and an upload compacts the index itself when it leaves too many shards (``compact_after_shards``)."""
    from operators.store.errors import CommitConflictError

    path, row = made_index(indices, name, tenant)
    running = row["ingest_task"]
    task = indices.service.store.task(running, None) if running else None
    if task is not None and task["status"] in UNFINISHED:
        raise indices._refusal(name, f"busy:{running}")
    if not (path / "manifest.json").exists():
        raise ApiError(404, f"index '{name}' has no documents yet: nothing to compact", param="name",
                       code="index_not_found")
    try:
        done = compact_index(path)
    except CommitConflictError as err:
        raise ApiError(409, f"index '{name}' changed while it was compacted: {err.message}", param="name",
                       code="index_busy") from None
    return {"index": name, "owner": row["owner"], **done}
