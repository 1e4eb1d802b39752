"""How a task that the task store's disk refused a write of (full, over quota, ``ulimit -f``) ends: failed, saying so
in a line, not with SQLAlchemy's ``OperationalError: (sqlite3.OperationalError) disk I/O error [SQL: ...]
[parameters: ...] (Background on this error at: ...)``, which named neither the disk nor what to do.

Why apart from ``serve.tasks.taskrunner``: its run and its workers are one job, the words of a refused write another
(``serve.http.disk_full`` finds the refusal).
"""

from __future__ import annotations

import logging
from typing import Any

from serve.http.disk_full import not_written, refused_write
from serve.tasks.taskstore import TaskStore

log = logging.getLogger("tessera.serve")

#: What the task's user can do: nothing until the disk has room.
AGAIN = "run the task again once the service's operator has freed space"


def finish_with_result(store: TaskStore, task_id: str, result: dict[str, Any]) -> None:
    """Store a finished task's result; where the disk refuses it (full: a result is the task's largest write), the
    task fails saying so in a line. A failure too big for the disk raises as before."""
    try:
        store.finish(task_id, "finished", result=result)
    except Exception as err:  # noqa: BLE001  (only the disk's refusal is answered here)
        if (refused := refused_write(err)) is None:
            raise
        log.warning("task %s: its result could not be stored (%s)", task_id, refused[1])
        store.finish(task_id, "failed", error=f"the result could not be stored: {not_written(refused[0])}; {AGAIN}")


def failure(task_id: str, err: Exception) -> str:
    """A run's failure as its task says it; where the disk refused a write (its progress, mid-run), in words."""
    if (refused := refused_write(err)) is None:
        return f"{type(err).__name__}: {err}"
    log.warning("task %s stopped: the disk refused a write (%s)", task_id, refused[1])
    return f"the task stopped: {not_written(refused[0])}; {AGAIN}"
