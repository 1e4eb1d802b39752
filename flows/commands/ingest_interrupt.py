"""Ctrl-C during an ingestion (``tessera ingest``, ``tessera bench``'s index builds): the first one stops it,
a second one exits at once.

The first Ctrl-C raises ``KeyboardInterrupt`` as usual: the run stops after the encoder call under
way (``flows.ingestion``), keeps the shards it committed, and the command says ``tessera: interrupted``
(status 130). The interpreter's exit still waits for that encoder call, in its thread. A second
Ctrl-C in that wait used to interrupt the wait itself, so Python finalised while torch ran, and C++
aborted the process ("terminate called without an active exception", status 134). Here the second
one flushes the output and ends the process with ``os._exit(130)``; a Ray cluster this process
started goes with it, as it does when the process is killed. Both commands use this one class, so
they stop alike. SIGTERM takes the same path (``_signals``): ``tessera: terminated (SIGTERM)``, status 143.
Both give their command line as ``resume`` (``typed_command``): the line then says to run that command again,
which resumes from the shards committed and, for a benchmark, the flows' saved runs (a Ctrl-C that said only
"interrupted" left users unsure that it would). In a Ray job (``ray job stop`` sends SIGTERM) the line says to submit
the job again, without the folder: that was Ray's temporary copy of the working directory, which Ray deletes, and a
job submitted again reads its relative paths where this one did.

Python runs a signal handler between any two bytecodes of the main thread, and where that is a weakref callback or a
``__del__`` (importlib's module lock has one), the ``KeyboardInterrupt`` it raises is printed as "Exception ignored"
and dropped: the ingestion went on to its end after a Ctrl-C under load. So while the context is open, a
``KeyboardInterrupt`` dropped so (``sys.unraisablehook``) is raised again a moment later, from ordinary code.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import sys
import threading

from flows import uris
from flows.commands._signals import stop_reason, stopped_status
from flows.commands.job_paths import in_ray_job


def typed_command(args: argparse.Namespace, paths: list[str | None], *, without: tuple[str, ...] = ()) -> str | None:
    """The command line as typed (``command_line``, set by the ``tessera`` parser), less the flags ``without``, with
    the folder it ran in where one of its ``paths`` is relative (not in a Ray job, which is submitted again: its
    folder is Ray's); None for a call without one (from Python)."""
    typed = getattr(args, "command_line", None)
    if not typed:
        return None
    relative = not in_ray_job() and any(path and not uris.is_uri(path) and not os.path.isabs(os.path.expanduser(path))
                                         for path in paths)
    return shlex.join([part for part in typed if part not in without]) + (f" (in {os.getcwd()})" if relative else "")


class StopOnInterrupt:
    """A context manager around an ingestion; ``announce()`` prints ``tessera: interrupted`` once, with how to
    resume when ``resume`` (the command that does) is given: ``how`` says what to do with it, ``job_how`` in a Ray
    job."""

    #: Seconds before a dropped ``KeyboardInterrupt`` is raised again: long enough to be out of the callback.
    REDELIVER_S = 0.05

    def __init__(self, resume: str | None = None, how: str = "run the same command again",
                 job_how: str = "submit the same Ray job again") -> None:
        self.resume, self.how = resume, job_how if in_ray_job() else how
        self.previous = None
        self.previous_hook = None
        self.redelivery: threading.Timer | None = None
        self.announced = False
        self.signum = signal.SIGINT

    def __enter__(self) -> "StopOnInterrupt":
        if threading.current_thread() is threading.main_thread():  # only the main thread may set a handler
            self.previous = signal.signal(signal.SIGINT, self._first)
            self.previous_hook, sys.unraisablehook = sys.unraisablehook, self._dropped
        return self

    def __exit__(self, kind, *exc) -> None:
        interrupted = kind is not None and issubclass(kind, KeyboardInterrupt)
        if self.previous_hook is not None:
            sys.unraisablehook = self.previous_hook
        if self.redelivery is not None:  # the stop was raised in time, or the run ended first
            self.redelivery.cancel()
        if self.previous is not None and not interrupted:  # interrupted: the exit handler stays until the end
            signal.signal(signal.SIGINT, self.previous)

    def _first(self, signum, frame) -> None:
        self.signum = signum
        self._raise()

    def _raise(self, *_) -> None:
        signal.signal(signal.SIGINT, self._again)
        raise KeyboardInterrupt

    def _dropped(self, unraisable) -> None:
        """``sys.unraisablehook``: this stop's ``KeyboardInterrupt``, raised in a callback that drops exceptions, is
        raised again once the main thread is back in ordinary code (the handler, ``_raise``, keeps the signal's
        number); anything else goes to the hook before."""
        ours = isinstance(unraisable.exc_value, KeyboardInterrupt) and signal.getsignal(signal.SIGINT) == self._again
        if not ours or threading.current_thread() is not threading.main_thread():
            self.previous_hook(unraisable)
            return
        signal.signal(signal.SIGINT, self._raise)
        # a real signal to the main thread, which wakes a wait there (``_thread.interrupt_main`` does not)
        self.redelivery = threading.Timer(self.REDELIVER_S, signal.pthread_kill,
                                          (threading.main_thread().ident, signal.SIGINT))
        self.redelivery.start()

    def _again(self, signum, frame) -> None:
        self.announce()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(stopped_status(self.signum))

    def announce(self) -> None:
        if not self.announced:
            self.announced = True
            said = "interrupted" if self.signum == signal.SIGINT else f"terminated ({stop_reason(self.signum)})"
            hint = f"; what was committed stays: to resume, {self.how}: {self.resume}" \
                if self.resume else ""
            print(f"tessera: {said}{hint}", file=sys.stderr, flush=True)
