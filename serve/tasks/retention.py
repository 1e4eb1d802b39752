"""Tasks and chats do not pile up forever: each task keeps its whole result (up to ``max_result_rows``).

Ended tasks (finished, failed, cancelled) last updated more than ``task_retention_days``
ago are deleted with their chats, when the ingress replica starts and then every hour; an
owner deletes one of its ended tasks at once (``DELETE /task/{id}``). A task that an
index's row names as its latest ingestion is kept: the index's listing and the check that
no two uploads into it run at once read it. SQLite gives the freed pages back to the file
only on ``VACUUM`` (docs/serving.md).
"""

from __future__ import annotations

import logging
import threading
import time

import sqlalchemy as sa

from serve.tasks.taskstore import FINAL, TaskStore, chats, indices, tasks

log = logging.getLogger("tessera.serve")

#: How often a replica prunes, in seconds, after the prune at its start.
PRUNE_EVERY_S = 3600.0


def _kept_by_an_index() -> sa.ColumnElement[bool]:
    """Tasks no index row names as its ingestion (the index reads that task's state)."""
    named = sa.select(indices.c.ingest_task).where(indices.c.ingest_task.is_not(None))
    return tasks.c.id.not_in(named)


def prune(store: TaskStore, days: float | None, *, now: float | None = None) -> int:
    """Delete the ended tasks last updated over ``days`` ago and their chats; how many tasks went (0 or None
    days: keep every task)."""
    if not days:
        return 0
    cutoff = (time.time() if now is None else now) - days * 86400
    doomed = sa.select(tasks.c.id).where(tasks.c.status.in_(FINAL), tasks.c.updated < cutoff, _kept_by_an_index())
    with store.engine.begin() as conn:
        ids = [row.id for row in conn.execute(doomed)]
        for start in range(0, len(ids), 500):  # bounded IN lists (SQLite's parameter limit)
            batch = ids[start:start + 500]
            conn.execute(chats.delete().where(chats.c.task_id.in_(batch)))
            conn.execute(tasks.delete().where(tasks.c.id.in_(batch), tasks.c.status.in_(FINAL)))
    return len(ids)


def delete_task(store: TaskStore, task_id: str, owner: str) -> str:
    """Delete ``owner``'s ended task and its chats: ``"ok"``, or why not: ``"missing"`` (no such task of
    ``owner``), ``"unfinished"`` (queued or running: cancel it first) or ``"index:<name>"`` (the latest
    ingestion of that index). One transaction, so a task that ends meanwhile is never half deleted."""
    with store.engine.begin() as conn:
        row = conn.execute(sa.select(tasks.c.status).where(tasks.c.id == task_id, tasks.c.owner == owner)
                           .with_for_update()).first()
        if row is None:
            return "missing"
        if row.status not in FINAL:
            return "unfinished"
        index = conn.execute(sa.select(indices.c.name).where(indices.c.ingest_task == task_id)).first()
        if index is not None:
            return f"index:{index.name}"
        conn.execute(chats.delete().where(chats.c.task_id == task_id))
        conn.execute(tasks.delete().where(tasks.c.id == task_id))
    return "ok"


class Pruner:
    """Prunes ``store`` now and then every ``every_s`` on a daemon thread; a failed prune is logged, not raised
    (the store may be down for a while: /healthz says so)."""

    def __init__(self, store: TaskStore, days: float | None, every_s: float = PRUNE_EVERY_S) -> None:
        self.store, self.days, self.every_s = store, days, every_s
        self._stop = threading.Event()
        self.first_round = threading.Event()  # set once the prune at the start has run (or failed)
        self.thread: threading.Thread | None = None

    def start(self) -> "Pruner":
        if not self.days:
            self.first_round.set()
        else:
            self.thread = threading.Thread(target=self._run, name="tessera-task-retention", daemon=True)
            self.thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                gone = prune(self.store, self.days)
                if gone:
                    log.info("tessera serve: deleted %d task(s) ended over %s day(s) ago (task_retention_days)",
                             gone, self.days)
            except Exception:  # noqa: BLE001  (a store that is down now: tried again at the next round)
                log.warning("tessera serve: pruning old tasks failed", exc_info=True)
            self.first_round.set()
            self._stop.wait(self.every_s)
