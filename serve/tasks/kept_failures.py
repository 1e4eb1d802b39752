"""The failures of tasks that the task store refused to take (its disk full, over quota, at a file size limit; a
write error), kept in Ray's key-value store (the GCS, in memory, not on that disk) until a write succeeds
(``serve.tasks.unstored`` stores them), and how a client reads one meanwhile.

Apart from ``serve.tasks.unstored``: the task workers keep a failure here (``serve.tasks.taskrunner``), and storing one
needs the task runner's ``interrupted``.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from serve.tasks.task_registry import NAMESPACE

log = logging.getLogger("tessera.serve")

_PREFIX = "outcome:"
#: What a kept outcome's error ends with, for the client: it is the task's end, not yet in the task store.
NOT_STORED = (" (this outcome is not stored yet: the task store refused the write; it is stored once the task store "
              "takes writes again)")


def _kv() -> Any:
    """Ray's key-value store, or None outside Ray (an in-process service in a test: its tasks never run)."""
    from ray.experimental import internal_kv

    return internal_kv if internal_kv._internal_kv_initialized() else None


def keep(task_id: str, error: str) -> bool:
    """Keep ``task_id``'s failure (``error``, one line) that the task store refused; a failure kept first (the
    worker's own reason) is not replaced by a later one (the replica's ``interrupted``). Whether it is kept."""
    kv = _kv()
    if kv is None:
        return False
    kv._internal_kv_put(_PREFIX + task_id, json.dumps({"error": error}), overwrite=False, namespace=NAMESPACE)
    log.warning("task %s: its failure could not be stored; kept until the task store takes writes: %s", task_id,
                error)
    return True


def kept(task_id: str) -> str | None:
    """The failure kept for ``task_id`` (not stored yet), or None."""
    kv = _kv()
    value = None if kv is None else kv._internal_kv_get(_PREFIX + task_id, namespace=NAMESPACE)
    return None if value is None else json.loads(value)["error"]


def kept_ids() -> list[str]:
    kv = _kv()
    if kv is None:
        return []
    return [key.decode().removeprefix(_PREFIX) for key in kv._internal_kv_list(_PREFIX, namespace=NAMESPACE)]


def forget(task_id: str) -> None:
    """Forget ``task_id``'s kept failure (it is stored now, or the task ended otherwise)."""
    kv = _kv()
    if kv is not None:
        kv._internal_kv_del(_PREFIX + task_id, namespace=NAMESPACE)


def as_answered(task: dict[str, Any], error: str) -> dict[str, Any]:
    """An unfinished task's row as a client reads it with its kept failure: failed, marked not stored."""
    return {**task, "status": "failed", "error": error + NOT_STORED, "outcome_stored": False,
            "log": [*task.get("log", []), f"failed: {error}{NOT_STORED}"]}
