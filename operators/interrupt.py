"""Stopping a long step between model batches, not only between the executor's batches.

One executor batch can hold a thousand rows, and a model scores them in many forward
passes; a cancel that waits for the whole batch waits for all of them. So the executors
run each operator call inside ``interruptible(check)``, and every model Tessera loads
gets a forward pre-hook (``install``) that calls ``checkpoint()``: before each forward
pass, ``check`` may raise ``FlowCancelled``. Outside an executor (a Serve replica, a
test calling an operator) there is no check and the hook does nothing.

Operators with long loops of their own (not through a model) may call ``checkpoint()``
between iterations; ``each_concurrently`` carries the check into a thread pool's threads.
``FlowCancelled`` must never be swallowed by a failure policy.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, ContextManager, Sequence, TypeVar

from operators.thread_value import ThreadValue

T = TypeVar("T")
R = TypeVar("R")

_check: ThreadValue[Callable[[], None]] = ThreadValue()


def interruptible(check: Callable[[], None] | None) -> ContextManager[None]:
    """Within this block, on this thread, ``checkpoint()`` calls ``check`` (which raises to stop)."""
    return _check.holding(check)


def current_check() -> Callable[[], None] | None:
    """This thread's check, to carry into worker threads (``with interruptible(current_check()):``)."""
    return _check.get()


def checkpoint() -> None:
    """Raise ``FlowCancelled`` here if the run this thread works for was cancelled."""
    check = _check.get()
    if check is not None:
        check()


def install(model: Any) -> Any:
    """Call ``checkpoint()`` before each forward pass of a torch module (once per module); returns it."""
    if not getattr(model, "_tessera_interruptible", False) and hasattr(model, "register_forward_pre_hook"):
        model.register_forward_pre_hook(lambda module, args: checkpoint())
        model._tessera_interruptible = True
    return model


def each_concurrently(call: Callable[[int, T], R], items: Sequence[T], workers: int) -> list[R]:
    """``call(position, item)`` for every item, ``workers`` at a time, results in order; the caller's cancel
    check goes with each call into the pool's threads."""
    if workers <= 1:
        return [call(i, item) for i, item in enumerate(items)]
    check = current_check()

    def in_pool(position: int, item: T) -> R:
        with interruptible(check):
            return call(position, item)

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tessera-call") as pool:
        return list(pool.map(in_pool, range(len(items)), items))
