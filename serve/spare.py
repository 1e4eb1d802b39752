"""A replica's spare task workers: the actors of its next tasks, started before those tasks exist.

``serve.taskrunner`` names a task's actor ``task-<id>``, so a spare is started under an id no task has yet
(``taskrunner.prestart``) and the replica's next task is made with that id (``take``): ``taskrunner.launch``
then finds the actor already up, its imports done (a spare still importing is not taken). A request refused
before its task is made gives the id back, so refusals under load start no processes. Outside a Serve replica
(a test's in-process service) there are no spares and every task starts its own actor, as without them.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from serve import taskrunner


class SpareWorkers:
    """Up to ``count`` spares, oldest first; safe to use from the replica's threads."""

    def __init__(self, store_url: str, *, env: dict[str, str], num_cpus: float, count: int):
        self.store_url, self.env, self.num_cpus, self.count = store_url, env, num_cpus, count
        self.replica = taskrunner.current_replica() if count > 0 else None
        self._lock = threading.Lock()
        # The spares' task ids, each with the ObjectRef that resolves when its imports are done (None: known done).
        self._spares: deque[tuple[str, Any]] = deque()
        self._starting = 0  # spares a refill is starting now, so concurrent refills start no more than needed

    def take(self) -> str | None:
        """The task id of the oldest spare whose imports are done, for the task about to be made; None when no
        spare is ready (the store picks an id and the task starts its own actor: a spare still importing
        everything would start later than an actor importing only what its task needs)."""
        with self._lock:
            for spare in self._spares:
                if spare[1] is None or taskrunner.finished(spare[1]):
                    self._spares.remove(spare)
                    return spare[0]
        return None

    def give_back(self, task_id: str | None) -> None:
        """An id that ``take`` gave when no task was made with it: its spare is taken first again."""
        if task_id is not None:
            self._keep((task_id, None), first=True)

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

    def waiting(self) -> list[str]:
        """The task ids the spares wait for, ready or not."""
        with self._lock:
            return [task_id for task_id, _ in self._spares]
