"""Indices for an admin key (``api_keys: [{id, sha256, admin: true}]``): every index the service made, whoever owns
it, deleting and compacting any of them.

A key that is removed from the configuration leaves its indices behind: private to an id nobody has, their names
taken and their disk in use, and no other key may change them. An admin key lists them with their owners
(``GET /v1/admin/indices``) and deletes them (``DELETE /v1/admin/indices/{name}``), as their owner would. It also
compacts any of them (``POST /v1/admin/indices/{name}/compact``): every upload adds a shard, and an index of many
small shards loads and searches slower, and rewrites a bigger manifest on each commit. The compaction is a task of the
admin key, as an upload is of its key (``serve.tasks.ingest_task.run_compact``): the route answers 202 with its id at
once, and ``GET /task/progress/{id}`` follows it. Any other key gets a 403.
Indices the service did not make (the default index, one ``tessera ingest`` built) are not listed and stay read-only
here.
"""

from __future__ import annotations

from typing import Any

from serve.http.errors import ApiError, index_refusal
from serve.indices.index_owner import OWNER_FILE, read_owner
from serve.indices.index_reading import EMPTY, describe


def require_admin(service: Any, tenant: str, what: str = "list, compact or delete every key's indices") -> None:
    if tenant not in service.admins:  # the key ids with api_keys' admin: true
        raise ApiError(403, f"only an admin key (api_keys: admin: true) may {what}", code="admin_only")


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
    """Queue a compaction of the index ``name`` the service made, whoever owns it, as a task of the admin key (a big
    index's merge takes minutes: no request waits for it): the task's id and where its progress is, whose result says
    what it did (shards before and after, live chunks, seconds). A 409 while an ingestion runs into it (its commit
    would make the compaction redo its merge; an upload compacts the index itself when it leaves too many shards,
    ``compact_after_shards``) and while another compaction of it is unfinished. The caller launches the task."""
    from serve.indices.index_owner import born
    from serve.tasks.ingest_task import COMPACT_STEPS

    path, row = made_index(indices, name, tenant)
    if not born(path):  # no commit yet: the empty manifest of a first upload that is still running
        raise ApiError(404, f"index '{name}' has no documents yet: nothing to compact", param="name",
                       code="index_not_found")
    service = indices.service
    job = {"compact": {"index": name, "index_path": str(path), "owner": row["owner"]}}
    with service.spares.lend() as lent:
        task_id, why = service.store.create_compact_task(tenant, name, job, COMPACT_STEPS,
                                                         limit=service.limits.max_tasks_per_key,
                                                         total=service.limits.max_tasks, task_id=lent.task_id)
        lent.made = task_id is not None
    if why.startswith("compacting:"):
        running = why.split(":", 1)[1]
        raise ApiError(409, f"index '{name}' is being compacted already (task {running}); wait for it to finish "
                       f"(GET /task/progress/{running})", param="name", code="index_busy")
    if task_id is None:
        raise index_refusal(service.limits, name, why)  # an ingestion into it runs, or too many unfinished tasks
    return {"task_id": task_id, "index": name, "owner": row["owner"], "status": "queued",
            "progress": progress_url(task_id)}


def progress_url(task_id: str) -> str:
    """Where a client follows a task (``serve.routes.tasks``)."""
    return f"/task/progress/{task_id}"
