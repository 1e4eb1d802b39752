"""A value that holds for a block of code on one thread: what a run hands its operators without a parameter.

Why not a parameter: the value (a flow's cancel check, a chat's answer sink) belongs to the run, and
reaches code several calls below the executor (a model's forward hook, the LLM gateway) that takes
no such argument. Why not a ``contextvars.ContextVar``: the executors' worker threads are plain
threads, which start with an empty context, and carrying a value into one is then explicit
(``with value.holding(value.get()):``), as it is here.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Generic, Iterator, TypeVar

T = TypeVar("T")


class ThreadValue(Generic[T]):
    """``with v.holding(x):`` makes ``v.get()`` return ``x`` on this thread until the block ends (else None)."""

    def __init__(self) -> None:
        self._local = threading.local()

    @contextlib.contextmanager
    def holding(self, value: T | None) -> Iterator[None]:
        before = self.get()
        self._local.value = value
        try:
            yield
        finally:
            self._local.value = before

    def get(self) -> T | None:
        return getattr(self._local, "value", None)
