"""Waiting for a language model (its first load, the embedded model's C calls) where Ctrl-C or a cancel stops it.

The first call of a process builds litellm's Router, importing litellm (5 to 20 s on a busy 2-core machine) and,
for the embedded model, llama_cpp. In the caller's thread nothing checked a cancel meanwhile: Ctrl-C in ``tessera
run`` (which cancels the run) was honoured once the import had ended, 9.5 s later here. So ``loaded_once`` builds
on a daemon thread and the caller waits, calling ``checkpoint()`` every ``POLL_S``: a cancel raises
``FlowCancelled`` at once, and a ``KeyboardInterrupt`` (``tessera chat``) ends the wait as it arrives. The build
goes on (an import cannot be stopped half-way), keeps its result for the next call, and, on a daemon thread, does
not hold the process at exit.

The embedded model's weights are loaded in the caller's thread: llama-cpp-python points the process's stdout and
stderr at /dev/null while it loads them (one C call, 0.3 to 0.8 s here), so anything printed meanwhile, from any
thread, is lost: on a thread of its own, the load ate the command's own "cancelled" line. A Ctrl-C waits for that
call, as Python runs handlers only between bytecodes; ``signals_held`` runs the handler after the load, when what
it prints (``tessera run``'s "cancelling") is seen.

Every such wait wakes every ``POLL_S`` (``awake_until_done``): a wait without a timeout missed a SIGINT that the
kernel gave another thread of the process, until the wait had ended.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from operators.interrupt import checkpoint, current_check
from operators.models.repository import models

T = TypeVar("T")

#: How often a waiting caller wakes (seconds): to check its cancel, and to run a signal handler.
POLL_S = 0.05


def loaded_once(name: str, key: Mapping[str, Any], build: Callable[[], T]) -> T:
    """``models.get_or_create(name, key, build)``; the first time, on a daemon thread, waited for here where a
    cancel or a Ctrl-C can stop the wait (a thread with neither, such as a Serve replica's, builds it itself)."""
    if models.get(name, key) is not None or not _stoppable():
        return models.get_or_create(name, key, build)
    loaded: Future[T] = Future()

    def load() -> None:
        try:
            loaded.set_result(models.get_or_create(name, key, build))
        except BaseException as err:  # noqa: BLE001  raised to the caller by ``result``
            loaded.set_exception(err)

    threading.Thread(target=load, name=f"tessera-load-{name}", daemon=True).start()
    return awake_until_done(loaded, checkpoint)


def awake_until_done(future: Future[T], between: Callable[[], None] | None = None) -> T:
    """``future.result()``, waking every ``POLL_S`` to call ``between()`` (which may raise). Waking matters on the
    main thread: the kernel may deliver a SIGINT to any thread of the process, and one delivered to another thread
    only flags the main thread, which a wait without a timeout never looks at; Ctrl-C in ``tessera run`` during the
    prompt's evaluation was handled once it had ended (17 to 36 s later, in 3 of 6 runs here)."""
    while True:
        try:
            return future.result(timeout=POLL_S)
        except TimeoutError:
            if between is not None:
                between()


def _stoppable() -> bool:
    """Whether anything may stop this thread's wait: a flow's cancel check, or Ctrl-C (the main thread)."""
    return current_check() is not None or threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive during the block are handled once it ends, by the handlers in place before it
    (on the main thread; elsewhere, where Python runs no handler, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    before = {signum: handler for signum, handler in before.items() if handler is not None}  # (None: set in C)
    for signum in before:
        signal.signal(signum, lambda signum, _frame: arrived.append(signum))
    try:
        yield
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
        for signum in arrived:
            signal.raise_signal(signum)
