"""A replica's spare task workers: the workers of its next tasks, waiting before those tasks exist.

A spare waits for an id no task has yet (``serve.tasks.task_registry`` maps it to the worker) and the replica's next
task is made with that id (``lend``): ``taskrunner.launch`` then finds the worker already up, its imports done (a spare
still importing is not taken). A spare is a new worker (``taskrunner.prestart``) or one back from its task
(``returned``): workers are reused, so the pool is refilled only when a worker has not come back
``REFILL_AFTER_S`` after a task took a spare (a short task's worker is the next spare; a new process per task left a
log file and a dead actor per task in Ray). A request refused before its task is made gives the id back, so
refusals under load start no processes. Outside a Serve replica (a test's in-process service), or with
``spare_task_workers: 0``, there are no spares and every task starts its own worker, which exits after it.

Every worker that comes back is kept (up to ``max_idle_task_workers``, default 16), and one is retired only once it
has waited ``idle_task_worker_retire_s`` (default 60 s) with more than ``spare_task_workers`` waiting
(``serve.service_settings``): so the pool follows the peak of concurrent tasks of the last minute, and N tasks at a
time run on N reused workers. Keeping only ``spare_task_workers`` retired all but one of them as they came back, and
the next burst started them again (a soak at 4 concurrent tasks started a worker per 3.3 tasks). The most recently
returned spare is taken first, so workers beyond the steady need are the ones that go idle and retire.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from serve.tasks import taskrunner
from serve.service_settings import IDLE_TASK_WORKER_RETIRE_S, MAX_IDLE_TASK_WORKERS

#: How long after a task took a spare (or found none) the pool is refilled: the task's worker is usually back by then.
REFILL_AFTER_S = 2.0


@dataclass
class Spare:
    """A waiting worker: the task id it waits for, the ObjectRef that resolves when its imports are done (None: known
    done), and since when it waits (``time.monotonic``)."""

    task_id: str
    ready: Any = None
    idle_since: float = field(default_factory=time.monotonic)


@dataclass
class Lent:
    """A spare lent to the task being made (None: no spare was ready; the store picks an id). Set ``made`` once a
    task has its id; otherwise the spare waits for the next task."""

    spare: Spare | None
    made: bool = False

    @property
    def task_id(self) -> str | None:
        return None if self.spare is None else self.spare.task_id


class SpareWorkers:
    """At least ``count`` spares once refilled, and every worker back from its task, up to ``keep_at_most``; a spare
    beyond ``count`` is retired after ``idle_s`` without a task. Safe to use from the replica's threads. ``replica``
    (an actor handle the workers watch) defaults to the Serve replica this runs in."""

    def __init__(self, store_url: str, *, env: dict[str, str], num_cpus: float, count: int, replica: Any = None,
                 idle_s: float = IDLE_TASK_WORKER_RETIRE_S, keep_at_most: int = MAX_IDLE_TASK_WORKERS):
        self.store_url, self.env, self.num_cpus, self.count = store_url, env, num_cpus, count
        self.replica = None if count <= 0 else replica if replica is not None else taskrunner.current_replica()
        self.idle_s, self.keep_at_most = idle_s, max(count, keep_at_most)
        self._lock = threading.Lock()
        self._spares: deque[Spare] = deque()  # taken from the left: the most recently returned first
        self._starting = 0  # spares a refill is starting now, so concurrent refills start no more than needed
        self._sweep: threading.Timer | None = None  # set while spares beyond ``count`` wait

    def waiting(self) -> list[str]:
        """The task ids the spares wait for, the next one taken first."""
        with self._lock:
            return [spare.task_id for spare in self._spares]

    @contextlib.contextmanager
    def lend(self) -> Iterator[Lent]:
        """A ready spare for the task the block makes; given back unless the block sets ``made`` (a refused request,
        or one that raised, starts no process and loses no spare)."""
        lent = Lent(self._take())
        try:
            yield lent
        finally:
            if not lent.made and lent.spare is not None:
                self._keep(lent.spare, first=True)  # taken first again, idle since it was before

    def _take(self) -> Spare | None:
        """The first spare whose imports are done; None when no spare is ready (the task then starts its own actor:
        a spare still importing everything would start later than an actor importing only what its task needs)."""
        with self._lock:
            for spare in self._spares:
                if spare.ready is None or taskrunner.finished(spare.ready):
                    self._spares.remove(spare)
                    return spare
        return None

    def _keep(self, spare: Spare, *, first: bool) -> None:
        """Keep ``spare`` in the pool, taken ``first`` (a warm one, back from its task) or last (a new one). When the
        pool is full, a ``first`` one takes the place of the last spare, which is retired; a new one is retired."""
        with self._lock:
            if len(self._spares) < self.keep_at_most:
                self._spares.appendleft(spare) if first else self._spares.append(spare)
                self._schedule_sweep()
                return
            if first:
                self._spares.appendleft(spare)
                spare = self._spares.pop()
        self._retire(spare)

    def _schedule_sweep(self) -> None:
        """With spares beyond ``count`` (the lock held), sweep when the one waiting longest has waited ``idle_s``."""
        if self._sweep is not None or len(self._spares) <= self.count:
            return
        due = min(spare.idle_since for spare in self._spares) + self.idle_s - time.monotonic()
        self._sweep = threading.Timer(max(due, 0.0) + 0.01, self._retire_idle)
        self._sweep.daemon = True
        self._sweep.start()

    def _retire_idle(self) -> None:
        """Retire the spares beyond ``count`` that waited ``idle_s``, the longest waiting first."""
        with self._lock:
            self._sweep = None
            deadline = time.monotonic() - self.idle_s
            idle = sorted((spare for spare in self._spares if spare.idle_since <= deadline),
                          key=lambda spare: spare.idle_since)
            retired = idle[:max(len(self._spares) - self.count, 0)]
            for spare in retired:
                self._spares.remove(spare)
            self._schedule_sweep()
        for spare in retired:
            self._retire(spare)

    @staticmethod
    def _retire(spare: Spare) -> None:
        """Kill a spare's worker (idle: its id has no task) and forget its id."""
        taskrunner.stop(spare.task_id, wait_s=0)
        taskrunner.release(spare.task_id)

    def returned(self, worker: str) -> None:
        """A worker back from its task (``TaskWorker.run`` gave its name) waits for a new task id, taken first (its
        caches are warm)."""
        if self.replica is not None:
            self._keep(Spare(taskrunner.wait_for(worker)), first=True)

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
                task_id, ready = taskrunner.prestart(self.store_url, self.replica, env=self.env,
                                                     num_cpus=self.num_cpus)
            finally:
                with self._lock:
                    self._starting -= 1
            self._keep(Spare(task_id, ready), first=False)
