"""A replica's spare task workers: the workers of its next tasks, waiting before those tasks exist.

A spare waits for an id no task has yet (``serve.task_registry`` maps it to the worker) and the replica's next task
is made with that id (``lend``): ``taskrunner.launch`` then finds the worker already up, its imports done (a spare
still importing is not taken). A spare is a new worker (``taskrunner.prestart``) or one back from its task
(``returned``): workers are reused, so the pool is refilled only when a worker has not come back
``REFILL_AFTER_S`` after a task took a spare (a short task's worker is the next spare; a new process per task left a
log file and a dead actor per task in Ray). A request refused before its task is made gives the id back, so
refusals under load start no processes. Outside a Serve replica (a test's in-process service), or with
``spare_task_workers: 0``, there are no spares and every task starts its own worker, which exits after it.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from serve import taskrunner

#: How long after a task took a spare (or found none) the pool is refilled: the task's worker is usually back by then.
REFILL_AFTER_S = 2.0


@dataclass
class Lent:
    """A spare's task id lent to the task being made (None: no spare was ready; the store picks an id). Set
    ``made`` once a task has the id; otherwise the spare waits for the next task."""

    task_id: str | None
    made: bool = False


class SpareWorkers:
    """Up to ``count`` spares, oldest first; safe to use from the replica's threads."""

    def __init__(self, store_url: str, *, env: dict[str, str], num_cpus: float, count: int):
        self.store_url, self.env, self.num_cpus, self.count = store_url, env, num_cpus, count
        self.replica = taskrunner.current_replica() if count > 0 else None
        self._lock = threading.Lock()
        # The spares' task ids, each with the ObjectRef that resolves when its imports are done (None: known done).
        self._spares: deque[tuple[str, Any]] = deque()
        self._starting = 0  # spares a refill is starting now, so concurrent refills start no more than needed

    @contextlib.contextmanager
    def lend(self) -> Iterator[Lent]:
        """The id of a ready spare for the task the block makes; given back unless the block sets ``made`` (a
        refused request, or one that raised, starts no process and loses no spare)."""
        lent = Lent(self._take())
        try:
            yield lent
        finally:
            if not lent.made and lent.task_id is not None:
                self._keep((lent.task_id, None), first=True)  # taken first again

    def _take(self) -> str | None:
        """The task id of the oldest spare whose imports are done; None when no spare is ready (the task then
        starts its own actor: a spare still importing everything would start later than an actor importing
        only what its task needs)."""
        with self._lock:
            for spare in self._spares:
                if spare[1] is None or taskrunner.finished(spare[1]):
                    self._spares.remove(spare)
                    return spare[0]
        return None

    def _keep(self, spare: tuple[str, Any], *, first: bool, warm: bool = False) -> None:
        """Keep ``spare`` in the pool; when the pool is full, retire it, or, a ``warm`` one (back from its task, its
        caches loaded), the newest spare in its place."""
        with self._lock:
            if warm and self._spares and len(self._spares) >= self.count:
                evicted = self._spares.pop()
                self._spares.appendleft(spare)
                spare = evicted
            elif len(self._spares) < self.count:
                self._spares.appendleft(spare) if first else self._spares.append(spare)
                return
        taskrunner.stop(spare[0], wait_s=0)  # the pool filled up meanwhile: retired (its id has no task)
        taskrunner.release(spare[0])

    def returned(self, worker: str) -> None:
        """A worker back from its task (``TaskWorker.run`` gave its name) waits for a new task id, taken first (its
        caches are warm); when the pool is full, the newest spare is retired in its place."""
        if self.replica is not None:
            self._keep((taskrunner.wait_for(worker), None), first=True, warm=True)

    def refill_later(self) -> None:
        """``refill`` in ``REFILL_AFTER_S``, on a daemon timer: the worker of a short task is back by then."""
        if self.replica is not None:
            timer = threading.Timer(REFILL_AFTER_S, self.refill)
            timer.daemon = True
            timer.start()

    def refill(self) -> None:
        """Start spares until there are ``count`` (when the replica starts, and ``refill_later``)."""
        if self.replica is None:
            return
        with self._lock:
            needed = self.count - len(self._spares) - self._starting
            self._starting += max(needed, 0)
        for _ in range(needed):
            try:
                spare = taskrunner.prestart(self.store_url, self.replica, env=self.env, num_cpus=self.num_cpus)
            finally:
                with self._lock:
                    self._starting -= 1
            self._keep(spare, first=False)
