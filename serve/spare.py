"""A replica's spare task workers: the actors of its next tasks, started before those tasks exist.

``serve.taskrunner`` names a task's actor ``task-<id>``, so a spare is started under an id no task has yet
(``taskrunner.prestart``) and the replica's next task is made with that id (``lend``): ``taskrunner.launch``
then finds the actor already up, its imports done (a spare still importing is not taken). A request refused
before its task is made gives the id back, so refusals under load start no processes. Outside a Serve replica
(a test's in-process service) there are no spares and every task starts its own actor, as without them.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from serve import taskrunner


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

    def _keep(self, spare: tuple[str, Any], *, first: bool) -> None:
        with self._lock:
            if len(self._spares) < self.count:
                self._spares.appendleft(spare) if first else self._spares.append(spare)
                return
        taskrunner.stop(spare[0], wait_s=0)  # the pool filled up meanwhile

    def refill(self) -> None:
        """Start spares until there are ``count`` (after a task took one, and when the replica starts)."""
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
