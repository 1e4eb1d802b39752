"""Progress events and cancellation, the same for every executor.

Executors call ``ProgressCallback(event)`` after every batch and check the
``CancelToken`` between batches, so a task API can show live progress and stop a
run within a batch's time.
"""

from __future__ import annotations

import datetime
import os
import sys
import threading
from dataclasses import asdict, dataclass
from typing import Callable

from operators.errors import FlowCancelled


@dataclass(frozen=True)
class ProgressEvent:
    """Where a run is: the current step, how many steps are done, rows done so far."""

    flow: str
    step: str | None
    op: str | None
    steps_done: int
    steps_total: int
    rows_done: int
    step_rows_done: int = 0
    finished: bool = False
    step_rows_in: int = 0  # rows of its input the current step has taken so far
    step_rows_total: int | None = None  # rows of its input, where known: how far the step is, and an ETA

    @property
    def fraction(self) -> float:
        return self.steps_done / self.steps_total if self.steps_total else 1.0

    def to_dict(self) -> dict:
        return {**asdict(self), "fraction": self.fraction}


ProgressCallback = Callable[[ProgressEvent], None]


def time_left(seconds: float, done: float, remaining: float) -> str:
    """``about 0:00:25 left``: how long ``remaining`` units take at the pace of ``done`` units in ``seconds``, in
    the words of every progress line off a terminal (``tessera run``'s steps, ``ingest``'s documents, ``train``'s
    steps)."""
    return f"about {datetime.timedelta(seconds=round(seconds * remaining / done))} left"


def redraws(stream=None) -> bool:
    """Whether progress on ``stream`` (stderr) may be a bar that redraws itself: a terminal that moves its cursor.
    A file, a pipe or a dumb terminal (``TERM=dumb``: Emacs's shell, an editor's console) gets lines instead: rich
    drew nothing there (``tessera run`` said nothing for the minutes of a RAG run), and tqdm's carriage returns piled
    up. ``TERM`` is read as rich reads it."""
    stream = sys.stderr if stream is None else stream
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):  # no stream, or a closed one
        return False
    return terminal and os.environ.get("TERM", "").lower() not in ("dumb", "unknown")


def in_notebook(stream=None) -> bool:
    """Whether ``stream`` (stderr) is a Jupyter kernel's: a ``tqdm.auto`` bar redraws in place there (a widget with
    ipywidgets, else a line the notebook rewrites at each carriage return), where progress lines piled up in the
    cell (an ingestion's line per shard and every 30 s: hundreds over an afternoon's corpus). The kernel's stream
    is no terminal, so ``redraws`` is False there."""
    stream = sys.stderr if stream is None else stream
    return type(stream).__module__.startswith("ipykernel.")


class CancelToken:
    """Set from any thread (an HTTP handler, a signal); executors stop at the next batch."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def cancel(self, reason: str = "cancelled") -> None:
        self.reason = reason
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def __repr__(self) -> str:
        """``CancelToken(not cancelled)`` or ``CancelToken(cancelled: 'reason')``, not the object's address."""
        return f"CancelToken(cancelled: {self.reason!r})" if self.cancelled else "CancelToken(not cancelled)"

    def raise_if_cancelled(self, step: str | None = None) -> None:
        if self._event.is_set():
            raise FlowCancelled(self.reason or "cancelled", step=step)
