"""SIGTERM as Ctrl-C, and Ctrl-C even in the background, for every ``tessera`` command.

``timeout``, systemd, Kubernetes and ``kill PID`` send SIGTERM, whose default kills the process at once:
no message, an ingestion's Ray workers left behind for a while, a run's ``--out`` half-written. Here SIGTERM
is handed to whatever handles SIGINT at that moment (``cancel_on_interrupt`` in ``tessera run``,
``StopOnInterrupt`` in ``tessera ingest`` and ``bench``, else ``KeyboardInterrupt``), so it takes the same
graceful path, and the command exits with 143 (128 + SIGTERM) where Ctrl-C gives 130. A second one aborts
as a second Ctrl-C does. ``tessera serve`` installs its own handlers (``serve.py``), which win.

``ray.init`` replaces the SIGTERM handler with its own (``sys.exit(15)``). ``flows.executors.ray_env.ensure_ray``,
which starts Ray for the executors and ingestion, puts the command's handler back, so SIGTERM takes the graceful
path there too. Where Ray is started otherwise (``flows.placement`` joining a cluster), SIGTERM unwinds the command
from where it was (a ``SystemExit`` that ``run_handler`` reports as ``terminated``, status 143, ``by_ray``): Ray's
processes are still shut down at exit, but the step under way is not waited for.

A shell starts a background job (``tessera run ... &`` in a script) with SIGINT ignored, and the ignore is
inherited; then ``kill -INT`` would do nothing outside the moments a command installs its own handler. So
an ignored SIGINT is turned back into Python's default (``KeyboardInterrupt``) for the whole command.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from flows.commands._support import EXIT_CANCELLED
from operators.env_numbers import env_seconds
from operators.errors import SettingError

#: Seconds a stopped command's interpreter may spend ending its threads before the process ends anyway
#: (``exit_within_grace``); ``TESSERA_EXIT_GRACE_S`` sets another.
EXIT_GRACE_S = 30.0
#: Then how long a Ray the command started or joined has to shut down before the process ends regardless.
RAY_SHUTDOWN_S = 15.0


def stopped_status(signum: int) -> int:
    """The exit status of a command stopped by ``signum``: 130 for SIGINT, 143 for SIGTERM (the shell's 128 + N)."""
    return 128 + signum


def stop_reason(signum: int | None) -> str:
    """How the messages name the stop: ``Ctrl-C`` for SIGINT, else the signal (``SIGTERM``)."""
    return "Ctrl-C" if signum in (None, signal.SIGINT) else signal.Signals(signum).name


class stop_signals_as_interrupt:
    """Around a command: SIGTERM takes the SIGINT path, and SIGINT is not ignored; both restored after, unless
    the command left a handler for its last moments (``StopOnInterrupt`` after a stop: a second signal ends the
    process at once while Ray shuts down)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.saved: tuple | None = None
        self.installed = None

    def __enter__(self) -> "stop_signals_as_interrupt":
        if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
            return self
        self.saved = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
        if self.saved[0] is signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        self.installed = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGTERM, self._terminate)
        return self

    def _terminate(self, signum, frame) -> None:
        self.signum = signum
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signum, frame)
        else:  # SIGINT ignored or at its C default meanwhile: stop anyway
            raise KeyboardInterrupt

    def __exit__(self, *exc) -> None:
        if self.saved is None:
            return
        if signal.getsignal(signal.SIGINT) is self.installed:
            signal.signal(signal.SIGINT, self.saved[0])
            signal.signal(signal.SIGTERM, self.saved[1])

    def by_ray(self, err: SystemExit) -> bool:
        """Whether ``err`` is SIGTERM through the handler ``ray.init`` puts in place of ours (``sys.exit(15)``, in
        the driver's main thread): the command unwinds from where it was, and ends as terminated."""
        handler = signal.getsignal(signal.SIGTERM)
        if err.code == signal.SIGTERM and getattr(handler, "__module__", "").startswith("ray."):
            self.signum = signal.SIGTERM
            return True
        return False

    def status(self, status: int) -> int:
        """``status``, with a cancel by SIGTERM as 143."""
        if status == EXIT_CANCELLED and self.signum is not None:
            return stopped_status(self.signum)
        return status


def exit_within_grace(status: int) -> None:
    """After a command was stopped and has said so: end the process with ``status`` if its interpreter is still
    exiting ``TESSERA_EXIT_GRACE_S`` seconds (30) later. At exit Python joins the threads still running; one can
    wait for ever on a lock that the main thread held when Ctrl-C struck it (a ``tessera ingest`` hung so, its
    thread in ``Future.set_exception`` waiting for the future's lock). A daemon timer: a normal exit ends it."""
    try:
        grace = env_seconds("TESSERA_EXIT_GRACE_S", EXIT_GRACE_S)
    except SettingError as err:  # the command has ended already: say so, and keep the default
        sys.stderr.write(f"tessera: {err}; ending within {EXIT_GRACE_S:g} s\n")
        grace = EXIT_GRACE_S

    def leave() -> None:
        try:
            sys.stderr.write(f"tessera: still exiting {grace:g} s after the stop; ending now\n")
            sys.stderr.flush()
            ray = sys.modules.get("ray")
            if ray is not None and ray.is_initialized():  # else the local Ray's agents outlive the process
                stopping = threading.Thread(target=ray.shutdown, name="tessera-ray-shutdown", daemon=True)
                stopping.start()
                stopping.join(RAY_SHUTDOWN_S)
        finally:
            os._exit(status)

    timer = threading.Timer(grace, leave)
    timer.daemon = True
    timer.name = "tessera-exit-grace"
    timer.start()
