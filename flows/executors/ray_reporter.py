"""The run reporter: one small actor per driver that the stage callables report to.

Why an actor of its own: the callables run in Ray's worker processes and the driver follows the run from its own
(``ray_progress``); this actor holds each run's batch statistics, its cancel flag and its first error between them.
"""

from __future__ import annotations

import threading
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from flows.runner import BatchStats
from operators.errors import FlowCancelled

#: The reporter's name: one per Ray job (a named actor that is not detached ends with its driver).
REPORTER_NAME = "tessera-run-reporter"


@ray.remote(num_cpus=0)
class _Reporter:
    """Collects batch statistics from the callables and holds each run's cancel flag and first error.

    One actor serves every run of a driver (keyed by run id), so a run does not wait for an actor
    process to start, which costs more than a small flow's own work (docs/results.md).
    """

    def __init__(self) -> None:
        self._events: dict[str, list[tuple[str, str, Any]]] = {}  # open runs only
        self._cancelled: set[str] = set()
        self._errors: dict[str, tuple] = {}

    def open(self, run: str) -> None:
        """Start keeping the run's records; a record for a run not open (closed, or never opened)
        is dropped, so a batch that reports after its run ended leaves nothing behind."""
        self._events.setdefault(run, [])

    def report(self, run: str, step: str, stats: BatchStats) -> bool:
        """Keep a batch's statistics; True when the batch should stop (its run was cancelled or ended)."""
        events = self._events.get(run)
        if events is None:
            return True
        events.append(("batch", step, stats))
        return run in self._cancelled

    def started(self, run: str, step: str) -> None:
        """A worker began the step's first batch (a run not open: dropped): a cancel while it runs names it."""
        self._events.get(run, []).append(("start", step, None))

    def cancelled(self, run: str) -> bool:
        return run in self._cancelled or run not in self._events

    def failed(self, run: str, error: tuple, node: tuple[str, str] | None = None) -> None:
        """Keep the run's first error; raised on a node other than this one (the driver's), its message says
        which (``node``: its id and IP)."""
        if run in self._events and run not in self._errors:
            if node is not None and node[0] != ray.get_runtime_context().get_node_id() \
                    and error[0] is not FlowCancelled:
                cls, message, *where = error
                error = (cls, f"{message} (on the Ray node at {node[1]}, id {node[0][:8]}, not the driver's node: "
                              "it reads its own TESSERA_HOME, models and paths)", *where)
            self._errors[run] = error

    def error(self, run: str) -> tuple | None:
        return self._errors.get(run)

    def cancel(self, run: str) -> None:
        if run in self._events:
            self._cancelled.add(run)

    def drain(self, run: str) -> list[tuple[str, str, Any]]:
        """The records since the last drain (the run stays open)."""
        events = self._events.get(run) or []
        if events:
            self._events[run] = []
        return events

    def close(self, run: str) -> None:
        """Forget the run (its last events were drained)."""
        self._events.pop(run, None)
        self._cancelled.discard(run)
        self._errors.pop(run, None)


_shared: dict[tuple[str, str], Any] = {}  # (node, job) -> the reporter's handle, held so it lives as long as the driver
_shared_lock = threading.Lock()


def shared_reporter() -> Any:
    """The driver's reporter, created on its first run (again after ``ray.shutdown()`` and a new ``ray.init()``),
    on the driver's node. Keyed by the driver's node and job: a new local Ray's first job has the id of the last
    one's (01000000), so the job alone kept the dead handle of the Ray that ``ray.shutdown()`` ended."""
    context = ray.get_runtime_context()
    job = (context.get_node_id(), context.get_job_id())
    with _shared_lock:
        if job not in _shared:
            _shared.clear()  # handles of an earlier Ray session are dead
            # On the driver's node: a worker node that dies must not take every run's reporter with it.
            here = NodeAffinitySchedulingStrategy(context.get_node_id(), soft=False)
            _shared[job] = _Reporter.options(name=REPORTER_NAME, get_if_exists=True, scheduling_strategy=here).remote()
        return _shared[job]
