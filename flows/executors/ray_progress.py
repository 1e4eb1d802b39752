"""The calling thread of a Ray Data run: progress, cancellation and errors, while stages run elsewhere.

A small actor (``ray_reporter._Reporter``, no CPU; one per driver, its runs kept apart by a
run id, so no run waits for an actor to start) collects what each batch did: callables
send it their ``BatchStats`` after every batch, before the batch's rows leave the
callable, and learn from the answer whether the run was cancelled. ``RunFollower``
polls it every ``POLL_SECONDS`` while a worker thread builds and runs the stages, feeds
``RunState`` (step records, hit ratios, metadata, timings, progress events, as the local
executor does) and forwards a ``CancelToken``'s cancel. An error on the caller's side (a
progress callback that raises, Ctrl-C) cancels the run the same way and waits for the
stages to stop before it reaches the caller.

Ray hands back only the text of an exception raised in a callable, so a callable sends an
operator's ``TesseraError`` to the reporter first and ``raise_error`` raises it again here,
with its type, step and operator.

``ReportLine`` lends the same reporter to jobs that are not flows (an ingestion's embed actors
report the documents they embedded): workers send ``(key, value)`` through a picklable
``ReportSender``, and the driver receives what arrived.
"""

from __future__ import annotations

import contextlib
import queue
import re
import threading
import time
import uuid
from typing import Any, Callable

import ray

from flows.executors.base import RunState, unjoinable_outputs
from flows.executors.ray_env import quiet_failures, ray_stopping, run_threads, running_executors
from flows.executors.ray_reporter import shared_reporter
from flows.executors.ray_warnings import say
from operators.errors import FlowCancelled, OperatorError, TesseraError

#: Seconds between two polls of the reporter by the driver.
POLL_SECONDS = 0.2
#: Seconds a cancelled run's stages get to reach a batch, which sees the cancel and fails. Past them the run's Ray Data
#: executions are shut down, and past twice them the run ends without its worker thread, which ends at its next
#: check of the cancel: a stage whose tasks wait for CPUs that another job holds runs no batch (nor does Ray Data's
#: reading of its input's metadata), and Ctrl-C, a cancelled task and a failed progress callback waited for ever.
CANCEL_GRACE_SECONDS = 5.0



class RunFollower:
    """Follows one run from the calling thread; the worker thread posts to ``messages``.

    Messages: ``("done", step)`` once a step's output is materialised, ``("time", name,
    seconds)`` for driver-side work (``RunState`` belongs to this thread only).
    """

    def __init__(self, state: RunState):
        self.state = state
        self.messages: queue.Queue[tuple] = queue.Queue()
        self.run_id = uuid.uuid4().hex  # this run's key in the shared reporter
        self.reporter: Any = None
        self.finished: set[str] = set()
        self.last_step: str | None = None   # the step of the last batch reported
        self.current: str | None = None     # the step the worker thread is building
        self.in_flight: str | None = None   # the furthest step (in flow order) a worker started

    def follow(self, work: Callable[[], None], name: str) -> None:
        """Run ``work`` on a worker thread until it ends; returns the error it raised, if any."""
        self.reporter = shared_reporter()
        ray.get(self.reporter.open.remote(self.run_id))  # before any batch can report
        errors: list[BaseException] = []
        ended = threading.Event()  # waited on, never ``worker.join``: see ``_stop``

        def target() -> None:
            try:
                work()
            except BaseException as err:  # handed to the calling thread
                errors.append(err)
            finally:
                ended.set()

        worker = threading.Thread(target=target, name=f"tessera-ray-{name}", daemon=True)
        run_threads.update((worker, threading.current_thread()))  # stopped before Ray at exit (ray_env)
        self.others = set(running_executors())  # another run's (a notebook's thread): never this run's to stop
        worker.start()
        cancel_sent, cancelled_at, waited = False, 0.0, False
        try:
            while not ended.wait(POLL_SECONDS):
                if ray_stopping.is_set():  # the process exits: no more calls, Ray shuts down next
                    raise FlowCancelled("Ray is shutting down", step=self.current or self.last_step)
                if self.state.cancel.cancelled and not cancel_sent:
                    self.reporter.cancel.remote(self.run_id)
                    cancel_sent, cancelled_at = True, time.monotonic()
                    quiet_failures()  # the stages fail on purpose now
                if cancel_sent and time.monotonic() - cancelled_at > CANCEL_GRACE_SECONDS:
                    self._stop_executions()
                if cancel_sent and time.monotonic() - cancelled_at > 2 * CANCEL_GRACE_SECONDS:
                    waited = True  # a wait no stop reaches (a ray.get of tasks that wait for CPUs): the run ends
                    break
                self.pump()
            self.pump()
            if errors:
                self.raise_error(errors[0], ray.get(self.reporter.error.remote(self.run_id)))
            # stopped executions end as if their data ran out: the run is cancelled, not finished with what came
            self.state.cancel.raise_if_cancelled(self.current or self.last_step)
        except BaseException:  # the caller's side failed (a progress callback, Ctrl-C): the run ends with it
            if not ended.is_set() and not ray_stopping.is_set() and not waited:
                self._stop(ended, cancel_sent)
            raise
        finally:
            if not ray_stopping.is_set():
                with contextlib.suppress(ray.exceptions.RayError):
                    self.reporter.close.remote(self.run_id)

    def _stop(self, ended: threading.Event, cancel_sent: bool) -> None:
        """Cancel the stages and wait for the worker thread (at most a batch per actor), so nothing
        of the run outlives the call: stages left running would hold the cluster's CPUs, and fail
        loudly once the reporter is gone.

        The wait is on ``ended``, never ``Thread.join``: Python 3.11's join, interrupted by a signal's exception
        (Ctrl-C's ``KeyboardInterrupt``, Ray's ``SystemExit`` on SIGTERM), marks the thread as ended while it runs
        (python/cpython#90882). A script's Ctrl-C then skipped this stop (the stages' failures printed a page of
        ``FlowCancelled`` tracebacks), and the exit's stop before Ray's shutdown (``ray_env``) skipped the thread."""
        quiet_failures()
        if not cancel_sent:
            with contextlib.suppress(ray.exceptions.RayError):
                self.reporter.cancel.remote(self.run_id)
        ended.wait(CANCEL_GRACE_SECONDS)
        self._stop_executions()
        ended.wait(CANCEL_GRACE_SECONDS)

    def _stop_executions(self) -> None:
        """Shut down the Ray Data executions this run started (those running now that were not when it began): their
        tasks in flight are cancelled (not killed: a task worker keeps the models it loaded for the next run) and
        those waiting for resources are dropped, so the worker thread's wait for their output ends."""
        for execution in set(running_executors()) - self.others:
            with contextlib.suppress(Exception):  # already ending on its own
                execution.shutdown(force=False, exception=FlowCancelled(self.state.cancel.reason or "cancelled"))

    def pump(self) -> None:
        """Feed ``RunState`` with the batches reported so far, then close finished steps."""
        messages = []
        while True:  # steps materialised before the drain below: all their batches are in it
            try:
                messages.append(self.messages.get_nowait())
            except queue.Empty:
                break
        try:
            events = ray.get(self.reporter.drain.remote(self.run_id))
        except ray.exceptions.RayError:
            events = []
        self.take(events)
        for kind, *args in messages:
            if kind == "time":
                self.state.result.timings.add(*args)
            else:
                self.finish(args[0])

    def take(self, events: list[tuple[str, str, Any]]) -> None:
        """The reporter's events: a batch's statistics (``"batch"``), or a worker's start of a step's first batch
        (``"start"``), which makes the step the furthest in flight, the one a cancel names (a slow plugin's step, not
        the retriever before it whose batches had all reported)."""
        order = list(self.state.steps)
        for kind, step, stats in events:
            self.start(step)
            if self.in_flight is None or order.index(step) > order.index(self.in_flight):
                self.in_flight = step
            if kind == "batch":
                self.last_step = step
                say(stats.warnings)  # the degraded queries' warnings, as the local run logs them
                self.state.add_batch(step, stats)

    def start(self, step: str) -> None:
        if step not in self.state.result.steps:
            self.state.start_step(step)

    def finish(self, step: str) -> None:
        self.start(step)
        if step not in self.finished:
            self.finished.add(step)
            self.state.finish_step(step, None, False)

    def raise_error(self, error: BaseException, remote: tuple | None) -> None:
        """The run's error as the local executor would raise it: one line, naming the step.

        Ray wraps an exception raised on a worker in a ``RayTaskError`` that is also an instance
        of the original class and whose text is the worker's whole traceback; the original
        comes from the reporter (``remote``) or the wrapper's ``cause``.
        """
        if self.state.cancel.cancelled:  # named after the step a worker stopped in, where one did
            stopped = remote[2] if remote is not None and remote[0] is FlowCancelled else None
            raise FlowCancelled(self.state.cancel.reason or "cancelled",
                                step=stopped or self.in_flight or self.last_step or self.current) from None
        if remote is not None:  # an operator's error, as the operator raised it
            cls, message, step, op, field_ = remote
            raise cls(message, step=step, op=op, field=field_) from error
        if (unjoinable := self._unjoinable(error)) is not None:
            raise unjoinable from None
        if isinstance(error, ray.exceptions.RayError):
            cause = getattr(error, "cause", None)
            if isinstance(cause, TesseraError):
                raise cause from None
            step = self.current or self.last_step  # the stage being built or run, not the last one that reported
            what = _raised(cause, error) if isinstance(cause, BaseException) else _without_cause(error)
            raise OperatorError(f"failed on Ray: {what}", step=step) from error
        raise error

    def _unjoinable(self, error: BaseException) -> OperatorError | None:
        """A step's batches' outputs that Ray Data could not join (a column of numbers in one, of text in another:
        in a task's block, a later stage's input or the collected result) as the local executor says it, named
        after the step that declares the column (Ray's own error named its stage's tasks, ``MapBatches(...)``); where
        that step is one branch of a fan-in whose other branches do not declare it (a count written into ``title``
        beside a branch that keeps the text), after the fan-in, as the local executor's union says it."""
        found = _MERGE.search(_COLOURS.sub("", f"{error}\n{getattr(error, 'cause', None) or ''}"))
        if found is None:
            return None
        flow = self.state.flow
        makers = [step for step in self.state.steps if found.group(1) in flow.operators[step].produces()]
        for step in self.state.steps:
            parents = tuple(flow.inputs.get(step) or ())
            if len(parents) > 1 and 0 < len(set(parents) & set(makers)) < len(parents):
                return OperatorError(f"cannot union the outputs of {', '.join(parents)}: {found.group(0)}", step=step)
        step = makers[0] if len(makers) == 1 else self.current or self.last_step
        return unjoinable_outputs(step, flow.operators[step].name if step else None, found.group(0))


class ReportLine:
    """One job's line from Ray workers to the driver, through the driver's reporter actor (a run of its own)."""

    def __init__(self) -> None:
        self.run_id = uuid.uuid4().hex
        self.reporter = shared_reporter()
        ray.get(self.reporter.open.remote(self.run_id))

    def sender(self) -> "ReportSender":
        return ReportSender(self.reporter, self.run_id)

    def receive(self) -> list[tuple[str, Any]]:
        """What the workers sent since the last call, as ``(key, value)``, in order per worker."""
        return [(key, value) for _, key, value in ray.get(self.reporter.drain.remote(self.run_id))]

    def close(self) -> None:
        with contextlib.suppress(ray.exceptions.RayError):
            self.reporter.close.remote(self.run_id)


class ReportSender:
    """A worker's end of a ``ReportLine``: ``send(key, value)`` does not wait; ``flush()`` waits until
    everything sent has arrived, so the driver sees it before anything the worker does next."""

    def __init__(self, reporter: Any, run_id: str) -> None:
        self.reporter, self.run_id = reporter, run_id
        self._last = None

    def __reduce__(self):
        return (ReportSender, (self.reporter, self.run_id))

    def send(self, key: str, value: Any) -> None:
        self._last = self.reporter.report.remote(self.run_id, key, value)

    def flush(self) -> None:
        if self._last is not None:
            ray.get(self._last)
            self._last = None


def _raised(cause: BaseException, error: BaseException) -> str:
    """``Type: message`` of what a worker raised, as the last line of its traceback in ``error``'s text says it.
    Ray Data adds its retry note ("Failed to apply UDF transform after 1/1 attempts ...") to the exception's
    arguments before it travels, which an ``OSError`` then reads as its file name: ``str(cause)`` named that note
    in place of the missing file."""
    name = type(cause).__name__
    for line in reversed(str(error).splitlines()):
        head, _, rest = line.strip().partition(": ")
        if head == name or head.endswith("." + name):  # a class outside builtins: its module's name too
            return f"{name}: {rest}" if rest else name
    return f"{name}: {_first_line(cause)}"


def _without_cause(error: BaseException) -> str:
    """What a Ray error that carries no exception says: its first line, or, for an actor whose creation raised (an
    operator built on a worker, ``_ray_udfs._make_op``, whose ``__init__`` or params check failed there alone), the
    last line of the worker's traceback, which names the exception (its first line, Ray's note with terminal colour
    codes and the actor's id, did not)."""
    lines = _lines(error)
    if getattr(error, "actor_init_failed", False) and len(lines) > 1 and _EXCEPTION_LINE.match(lines[-1]):
        return f"an actor of the stage could not start: {lines[-1]}"
    return lines[0] if lines else type(error).__name__


def _first_line(error: object) -> str:
    lines = _lines(error)
    return lines[0] if lines else type(error).__name__


def _lines(error: object) -> list[str]:
    return [line.strip() for line in _COLOURS.sub("", str(error)).splitlines() if line.strip()]


_MERGE = re.compile(r"Unable to merge: Field (\S+) has incompatible types: [^\n]*")  # pyarrow's, however wrapped
_COLOURS = re.compile(r"\x1b\[[0-9;]*m")  # the terminal colours Ray writes around a task's name
_EXCEPTION_LINE = re.compile(r"[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b")  # a traceback's last line
