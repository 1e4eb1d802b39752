"""A new task's row, its statuses and the progress writers' pace: what the task store inserts and what its workers
write.

Apart from ``serve.tasks.taskstore`` so that the store's module holds its queries alone.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

#: A task's statuses: an unfinished one moves forward, a final one never changes (``serve.tasks.taskstore``).
UNFINISHED = ("queued", "running")
FINAL = ("finished", "failed", "cancelled")

#: A task's progress is written at most this often (and at every step boundary), by the progress writers.
PROGRESS_EVERY_S = 0.5


class WriteThrottle:
    """When a progress writer writes to the task store: at most once per ``PROGRESS_EVERY_S``, and whenever ``forced``
    (a step starts or ends, a log line): the one throttle of the three writers
    (``serve.tasks.taskrunner.ProgressWriter``, ``serve.tasks.ingest_task``'s two), so a task's row is not rewritten
    for every batch or shard."""

    def __init__(self) -> None:
        self.every_s = PROGRESS_EVERY_S  # read when the writer is made (a test sets it to 0)
        self.written = 0.0  # ``perf_counter`` of the last write allowed

    def due(self, forced: bool = False) -> bool:
        """Whether to write now; when it is, the write counts as made now."""
        now = time.perf_counter()
        if not forced and now - self.written < self.every_s:
            return False
        self.written = now
        return True


def pending_progress(steps: list[str]) -> dict[str, dict[str, Any]]:
    """Each step's progress before it starts (``step_progress`` of a new task)."""
    return {s: {"status": "pending", "rows_in": 0, "rows_out": 0, "seconds": 0.0} for s in steps}


def new_task_id() -> str:
    return uuid.uuid4().hex


def task_row(owner: str, flow: str, spec: dict[str, Any], queries: list[dict[str, str]], steps: list[str],
             first_log: str, task_id: str | None) -> dict[str, Any]:
    now = time.time()
    return {"id": task_id or new_task_id(), "owner": owner, "status": "queued", "flow": flow, "spec": spec,
            "queries": queries, "steps": steps, "created": now, "updated": now, "current_step": None,
            "steps_done": 0, "rows_done": 0,
            "step_progress": pending_progress(steps),
            "log": [first_log], "error": None}  # no result yet: both its columns NULL
