"""How a task ended when the task store would not take it (its disk full, over quota, at a file size limit; a write
error): the outcome is kept in Ray's key-value store (the GCS, in memory, not on that disk) until a write succeeds.

Before, such a task stayed ``running`` while its disk stayed full: its worker had ended, its failure could not be
written, and a client polling ``GET /task/progress/{id}`` got a 507 per poll; once space was freed, the next poll
failed it as ``interrupted (... the service was restarted or the worker died)``, which was not why. Now the worker
(or the replica that watched it end, or the poll that finds it without a worker) keeps the failure it could not store;
a poll and ``GET /tasks`` answer it, marked ``outcome_stored: false``, and it is stored by the next write that
succeeds: a poll of the task, a listing, a task's end, an enqueue, a replica's start. Only a failure is kept (a line):
a result the disk refused fails its task anyway (``serve.tasks.refused_writes``).

Apart from ``serve.tasks.taskrunner``: what is kept where, and when it is stored, is one job; running tasks another.
"""

from __future__ import annotations

import logging
from typing import Any

from serve.tasks.kept_failures import NOT_STORED, forget, kept, kept_ids
from serve.tasks.task_rows import UNFINISHED
from serve.tasks.taskrunner import interrupted
from serve.tasks.taskstore import TaskStore

log = logging.getLogger("tessera.serve")


def store_kept(store: TaskStore, task_id: str) -> bool:
    """Store ``task_id``'s kept failure (an upload's leftovers go as ``interrupted`` removes them) and forget it;
    True when the task is final in the store now (or there is no such task), False while the store refuses."""
    error = kept(task_id)
    if error is None:
        return True
    try:
        interrupted(store, task_id, error)  # False when the task was final already (cancelled since): nothing to do
    except Exception as err:  # noqa: BLE001  (the store refuses still: kept for the next write)
        log.info("task %s: its kept failure is not stored yet (%s)", task_id, type(err).__name__)
        return False
    forget(task_id)
    log.warning("task %s: its kept failure is stored now", task_id)
    return True


def store_all(store: TaskStore) -> int:
    """Store every kept failure the store takes now (after the first it refuses, the rest wait too); how many are
    left."""
    left = kept_ids()
    for number, task_id in enumerate(left):
        if not store_kept(store, task_id):
            return len(left) - number
    return 0


def shown_failed(store: TaskStore, owner: str) -> dict[str, tuple[str, str]]:
    """``owner``'s unfinished tasks with a kept failure, each with its stored status and that failure: answered as
    failed (``kept_failures.as_answered``), so ``GET /tasks?status=`` lists them with the failed ones, not with the
    status the store holds (a task shown as failed was listed under running, and missing under failed)."""
    found = {}
    for task_id in kept_ids():
        row, error = store.task(task_id, owner), kept(task_id)
        if row is not None and row["status"] in UNFINISHED and error is not None:
            found[task_id] = (row["status"], error)
    return found


def listed(tasks: list[dict[str, Any]], counts: dict[str, int], failed: dict[str, tuple[str, str]]) -> None:
    """``GET /tasks``'s page and counts (changed in place) with the kept failures (``shown_failed``)."""
    for task_id, (status, error) in failed.items():
        counts[status] -= 1
        counts["failed"] = counts.get("failed", 0) + 1
        if not counts[status]:
            del counts[status]
        for task in tasks:
            if task["id"] == task_id:
                task.update(status="failed", error=error + NOT_STORED, outcome_stored=False)
