"""Ray for Tessera's jobs: starting it quietly, and keeping Ray Data's own output out of the user's way.

Everything that runs work on Ray (the Ray Data executor, ingestion's shard pipeline, the
benchmarker through them) starts Ray here and wraps its datasets here, so Ray is set up
one way: no dashboard, warnings only, progress bars that are Tessera's own, and none of
the start-up lines a user cannot act on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import weakref
from typing import Any, Iterator

from flows.executors.stderr_filter import filter_known_ray_noise
from flows.progress import in_notebook

#: ``ray.init`` arguments when Tessera starts Ray itself (never when Ray is already running).
DEFAULT_RAY_INIT: dict[str, Any] = {
    "ignore_reinit_error": True,
    "include_dashboard": False,
    "logging_level": logging.WARNING,
}

#: Loggers through which Ray Data reports a failed stage, with its traceback.
_FAILURE_LOGGERS = ("ray.data._internal.execution.streaming_executor_state", "ray.data.exceptions")
#: Ray Data's warning when a dataset starts while no CPU is free (``Dataset._execute``, logged once per process):
#: in a Tessera run the CPUs are held by the run's own earlier stages and free up as they finish, so the job never
#: hangs as the warning says; dropped while a Tessera run goes (``quiet_ray_data``), every other line kept.
_NO_CPU_LOGGER = "ray.data.dataset"
_NO_CPU_WARNING = "Warning: The Ray cluster currently does not have any available CPUs."
#: Ray Data's per-execution INFO lines and progress-bar notices.
_CHATTY_LOGGERS = {"ray.data._internal.execution.streaming_executor": logging.WARNING,
                   "ray.data._internal.progress": logging.ERROR}


#: Ray starts its workers at niceness 15, below the driver. Tessera's workers do the run's work (the local
#: executor does it at the caller's niceness), so on a machine shared with other work a batch run yielded to
#: every other process; a Ray that Tessera starts keeps them at the driver's niceness. Read by the raylet
#: when it starts: joining a running cluster changes nothing there.
WORKER_NICENESS = {"RAY_worker_niceness": "0"}


def keep_workers_at_driver_niceness() -> None:
    """``WORKER_NICENESS`` in this process's environment unless set: a Ray started next runs its workers so."""
    for name, value in WORKER_NICENESS.items():
        os.environ.setdefault(name, value)


#: Set once ``start_ray_early``'s start is over (started or failed), until ``ensure_ray`` or the exit waited for it.
_early_start: list[threading.Event] = []
#: Ray's warning that ``ray.init`` off the main thread sets no SIGTERM handler (Tessera sets its own, ``ensure_ray``).
_SIGTERM_NOTE = "SIGTERM handler is not set because current thread is not the main thread."


def start_ray_early(**overrides: Any) -> None:
    """Start Ray on a thread of its own while the caller goes on (an ingestion stages its source meanwhile):
    the next ``ensure_ray`` waits for it. On the H200 Ray's start and the staging each took 10 s and more of the
    916K ingestion. A start that fails here is tried again, and raises, in that ``ensure_ray``."""
    import atexit

    import ray

    if ray.is_initialized() or _early_start:
        return
    over = threading.Event()
    _early_start.append(over)
    atexit.register(_wait_early_start)  # after Ray's own, so it runs first: ray.shutdown never meets a half start
    threading.Thread(target=_start_and_stay, args=(over,), kwargs=overrides, name="tessera-ray-start",
                     daemon=True).start()


def _start_and_stay(over: threading.Event, **overrides: Any) -> None:
    """Start Ray, then stay until the process ends: Ray's GCS and raylet die with the thread that started them
    (Linux sends a child its parent-death signal when the creating *thread* ends, and Ray asks for one), so a
    thread that returned took the local cluster down with it a minute later."""
    try:
        with contextlib.suppress(Exception), _without_record(logging.getLogger("ray._private.worker"), _SIGTERM_NOTE):
            _start(**overrides)
    finally:
        over.set()
    threading.Event().wait()


def _wait_early_start() -> None:
    while _early_start:
        _early_start.pop().wait()


@contextlib.contextmanager
def _without_record(logger: logging.Logger, message: str) -> Iterator[None]:
    def keep(record: logging.LogRecord) -> bool:
        return record.getMessage() != message

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def ensure_ray(**overrides: Any) -> None:
    """Start a local Ray (or join ``RAY_ADDRESS``) unless this process is already connected; an address Ray cannot
    join is a ``RayAddressError`` (``ray_address``). Waits for a ``start_ray_early`` under way first."""
    _wait_early_start()
    _start(**overrides)


def _start(**overrides: Any) -> None:
    import ray

    from flows.executors.ray_address import check_ray_address, joining_failed, ray_client_refused, start_timed_out

    _stop_ray_data_first()
    if ray.is_initialized():
        from ray.util.client import ray as client

        if client.is_connected():  # the caller's own ray.init("ray://..."): Ray Data cannot run on it
            raise ray_client_refused("this process's ray.init('ray://...')")
        return
    check_ray_address(overrides.get("address"), temp_dir=overrides.get("_temp_dir"))
    _quiet_start_up()
    if in_notebook():  # the kernel shows descriptor 2 in the cell: Ray's line per actor, as a command drops it
        filter_known_ray_noise(python_stderr=False)
    keep_workers_at_driver_niceness()
    on_main_thread = threading.current_thread() is threading.main_thread()
    sigterm = signal.getsignal(signal.SIGTERM) if on_main_thread else None
    try:
        ray.init(**{**DEFAULT_RAY_INIT, **overrides})
    except ConnectionError as err:
        raise joining_failed(err, overrides.get("address")) from None
    except Exception as err:  # noqa: BLE001  (Ray raises a bare Exception when its node does not come up)
        if (refused := start_timed_out(err)) is None:
            raise
        raise refused from None
    if callable(sigterm):
        # ray.init replaces SIGTERM's handler with a sys.exit(15); a handler the program set (tessera's commands:
        # cancel as Ctrl-C does) goes back, so a SIGTERM stops a Ray run as gracefully as a local one
        signal.signal(signal.SIGTERM, sigterm)


_stopping_first: list[bool] = []  # whether ``_stop_ray_data_first`` is registered


def _stop_ray_data_first() -> None:
    """At exit, before Ray's own ``ray.shutdown`` (an ``atexit`` hook registered after it runs first): a run that
    a second Ctrl-C or SIGTERM aborted leaves Ray Data's executor threads (and the run's worker thread) going, whose
    next Ray call after the shutdown joined the cluster again ("Connecting to existing Ray cluster at address") or
    failed (``RuntimeError: Ray is not initialized`` in Ray Data's stats). Their executors are shut down while Ray
    is still there, their failures unsaid, and no call joins Ray again once it is gone."""
    import atexit

    if not _stopping_first:
        _stopping_first.append(True)
        atexit.register(_stop_ray_data)


def _stop_ray_data() -> None:
    with contextlib.suppress(ImportError, AttributeError):  # Ray's internals: another release may differ
        from ray._private import auto_init_hook

        auto_init_hook.enable_auto_connect = False  # a Ray call after ray.shutdown raises, not starts Ray again
    ray_stopping.set()
    if not _still_running():
        return
    quiet_failures()
    for executor in running_executors():
        with contextlib.suppress(Exception):
            executor.shutdown(force=True)
    for thread in list(run_threads):  # they end with their executors, a follower at its next poll
        if thread is not threading.current_thread():
            thread.join(RUN_THREAD_EXIT_S)


#: The threads of Tessera's Ray runs (``ray_progress.RunFollower``: each run's worker, and its follower): an aborted
#: run's worker goes on without its follower, and a run followed off the main thread goes on as the process exits.
run_threads: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()
#: Set at exit, before Ray's own shutdown: followers stop asking Ray (a call after it ends the process, status 1).
ray_stopping = threading.Event()
#: Seconds the exit waits for each such thread, once Ray Data's executors are shut down.
RUN_THREAD_EXIT_S = 1.0


def running_executors() -> list[threading.Thread]:
    """Ray Data's executors still running a dataset (no public API: each ``StreamingExecutor`` is its thread)."""
    return [t for t in threading.enumerate() if type(t).__name__ == "StreamingExecutor" and t.is_alive()]


def _still_running() -> bool:
    """Whether a Ray run's worker thread or a Ray Data executor still goes."""
    return any(t.is_alive() for t in list(run_threads)) or bool(running_executors())


def _quiet_start_up() -> None:
    """Ray 2.60 enables token authentication for a new local cluster and warns about it on every
    ``ray.init``: a note for cluster operators (``RAY_AUTH_MODE`` is theirs to set; docs/cluster.md
    says how). Tessera keeps the secure default and drops the note."""
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(logging.ERROR)


def configure_dataset(ds: Any, *, preserve_order: bool = True) -> Any:
    """Give a new root dataset its own context: order as asked, no Ray progress bars or start lines.

    Each dataset gets its own copy of the current ``DataContext``; the global one is never changed.
    """
    ctx = ds.context
    ctx.execution_options.preserve_order = preserve_order
    ctx.enable_progress_bars = False
    ctx.enable_operator_progress_bars = False
    ctx.print_on_execution_start = False
    return ds


@contextlib.contextmanager
def quiet_ray_data() -> Iterator[None]:
    """Ray Data's per-execution INFO lines, progress-bar notices and "no available CPUs" warning off while a run
    goes.

    Ray Data re-applies its own logging config (``ray.data`` at DEBUG) whenever a dataset
    runs, so the levels are set on the child loggers that write those lines, and restored
    afterwards.
    """
    import ray.data  # noqa: F401 - configures the ray.data loggers, so the levels below stick

    before = {name: logging.getLogger(name).level for name in (*_CHATTY_LOGGERS, *_FAILURE_LOGGERS)}
    for name, level in _CHATTY_LOGGERS.items():
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < level:
            logger.setLevel(level)
    quiet_failures()  # a failed stage reaches the caller as the step's own error, once
    with _no_cpu_warning_dropped():
        try:
            yield
        except BaseException:
            if _still_running():  # aborted (a second Ctrl-C): its stages fail on their threads after this
                before = {name: level for name, level in before.items() if name not in _FAILURE_LOGGERS}
            raise
        finally:
            for name, level in before.items():
                logging.getLogger(name).setLevel(level)


_runs_dropping = [0]  # runs under way that drop the warning (runs may overlap, in threads)
_dropping_lock = threading.Lock()


@contextlib.contextmanager
def _no_cpu_warning_dropped() -> Iterator[None]:
    """Ray Data's "no available CPUs" warning dropped until the last overlapping run ends."""
    logger = logging.getLogger(_NO_CPU_LOGGER)
    with _dropping_lock:
        _runs_dropping[0] += 1
        logger.addFilter(_drop_no_cpu_warning)
    try:
        yield
    finally:
        with _dropping_lock:
            _runs_dropping[0] -= 1
            if not _runs_dropping[0]:
                logger.removeFilter(_drop_no_cpu_warning)


def _drop_no_cpu_warning(record: logging.LogRecord) -> bool:
    """False for Ray Data's "no available CPUs" warning (``_NO_CPU_WARNING``), True for every other record."""
    return not str(record.msg).startswith(_NO_CPU_WARNING)


def quiet_failures() -> None:
    """No tracebacks of failed stages: a failure reaches the caller as the step's error (restored by
    ``quiet_ray_data``; Ray Data still writes them to its log file in the session folder)."""
    for name in _FAILURE_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
