"""Which Ray actor runs a task: a task worker runs many tasks one after another, so its name is not its task's.

A worker is a detached actor named ``worker-<hex>`` in the namespace ``tessera-tasks``; the task it runs (or, for a
spare, the id of the task it waits for) maps to that name in Ray's key-value store (the GCS, so any replica reads it,
and it goes with the cluster as the actors do). A task's worker lives when its mapping names an actor that Ray lists:
``ray.util.list_named_actors`` says so without the warning ``ray.get_actor`` logs for every absent name (663 of them
in a 25-minute soak, one per read of an unfinished task whose actor had not started yet).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

NAMESPACE = "tessera-tasks"
_PREFIX = "task:"


def new_worker_name() -> str:
    return f"worker-{uuid.uuid4().hex}"


def assign(task_id: str, worker: str) -> None:
    """Record that ``worker`` runs (or, a spare, waits for) ``task_id``."""
    from ray.experimental import internal_kv

    internal_kv._internal_kv_put(_PREFIX + task_id, worker, overwrite=True, namespace=NAMESPACE)


def release(task_id: str) -> None:
    """Forget the task's worker: the task ended, or its worker is gone."""
    from ray.experimental import internal_kv

    internal_kv._internal_kv_del(_PREFIX + task_id, namespace=NAMESPACE)


def worker_of(task_id: str) -> str | None:
    """The name of the worker recorded for the task, alive or not; None when none is."""
    from ray.experimental import internal_kv

    name = internal_kv._internal_kv_get(_PREFIX + task_id, namespace=NAMESPACE)
    return None if name is None else name.decode()


def live_workers() -> set[str]:
    """The names of the task workers Ray has (starting or running; a dead actor's name is not listed)."""
    import ray

    return {actor["name"] for actor in ray.util.list_named_actors(all_namespaces=True)
            if actor["namespace"] == NAMESPACE}


def assigned() -> dict[str, str]:
    """Task id to worker name, for the workers that live (what a replica's spares wait for, what runs)."""
    from ray.experimental import internal_kv

    live = live_workers()
    pairs = ((key.decode().removeprefix(_PREFIX), worker_of(key.decode().removeprefix(_PREFIX)))
             for key in internal_kv._internal_kv_list(_PREFIX, namespace=NAMESPACE))
    return {task_id: name for task_id, name in pairs if name in live}


def forget(worker: str) -> None:
    """Forget every task id recorded for ``worker`` (a spare exiting: the id it waited for has no task)."""
    from ray.experimental import internal_kv

    for key in internal_kv._internal_kv_list(_PREFIX, namespace=NAMESPACE):
        if internal_kv._internal_kv_get(key, namespace=NAMESPACE) == worker.encode():
            internal_kv._internal_kv_del(key, namespace=NAMESPACE)


def handle(task_id: str) -> Any:
    """The actor handle of the task's worker, or None when no worker of it lives."""
    return _live_actor(worker_of(task_id))


def _live_actor(name: str | None) -> Any:
    """The handle of the worker named ``name``, or None when Ray lists no such actor."""
    import ray

    if name is None or name not in live_workers():
        return None
    try:
        return ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:  # it died between the listing and the look-up
        return None


def alive(task_id: str) -> bool:
    name = worker_of(task_id)
    return name is not None and name in live_workers()


def stop(task_id: str, wait_s: float = 5.0) -> bool:
    """Kill the task's worker, if it lives, and wait up to ``wait_s`` for it to be gone: its step work ends with its
    process, so what it wrote can then be cleaned up (a cancelled task's worker is never reused). True when no worker
    of the task lives now (none did, or it died in time); False when it may still write into an upload's folder."""
    import ray

    name = worker_of(task_id)  # one read: the kill and the wait are about the same worker
    worker = _live_actor(name)
    if worker is not None:
        ray.kill(worker, no_restart=True)
        deadline = time.monotonic() + wait_s
        while (living := name in live_workers()) and time.monotonic() < deadline:
            time.sleep(0.05)
        if living:
            return False
    release(task_id)
    return True
