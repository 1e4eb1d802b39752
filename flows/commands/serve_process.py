"""``tessera serve``'s parent process: it starts the runner (``flows/commands/serve_drain.py``: ``serve run`` with a
drain) as its child and passes it the signals that stop it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

#: How long ``tessera serve`` waits, by default, for the requests in flight once told to stop: under the 30 s that
#: Kubernetes gives a pod by default (``terminationGracePeriodSeconds``) before SIGKILL, leaving Serve's shutdown
#: the rest.
DEFAULT_GRACE_PERIOD_S = 25.0


def runner_command(config: str, address: str | None, grace_period_s: float) -> list[str]:
    """The child's command line: ``serve run CONFIG [--address A]`` under the drain runner."""
    command = [sys.executable, "-m", "flows.commands.serve_drain", "--grace-period", f"{grace_period_s:g}", "run",
               config]
    return command + ["--address", address] if address else command


def run_serve(command: list[str], env: dict[str, str], ready_url: str | None = None) -> int:
    """Run the runner as a child in this process group and return its exit status. SIGTERM, and a SIGINT sent to
    this process alone, reach it as SIGINT, each time: the first makes it drain the requests in flight, then ``serve
    run`` deletes the app, shuts Serve down and exits 0; a second ends the drain at once (SIGTERM straight to it
    would end in Ray's own handler, without Serve's shutdown). Our handlers are set before the child starts, so it
    begins with both signals at their defaults (a handler does not survive ``exec``), also when this shell ignored
    SIGINT (``tessera serve &`` in a script). With ``ready_url`` (the app's ``/healthz``), one line says when it
    first answers 200: the models loaded, the requests can come (``say_when_ready``)."""
    child: subprocess.Popen | None = None
    early = 0  # signals that came before the child had started

    def stop(signum, frame) -> None:
        nonlocal early
        # Ctrl-C at a terminal reaches the whole foreground group, the child included: don't send it twice.
        if child is not None and signum == signal.SIGINT and _in_terminal_foreground():
            return
        if child is None:
            early += 1
        elif child.poll() is None:
            child.send_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    child = subprocess.Popen(command, env=env, preexec_fn=_die_with_parent())
    if early:  # a signal came while it started: nothing can be in flight yet
        child.send_signal(signal.SIGINT)
    if ready_url:
        threading.Thread(target=say_when_ready, args=(child, ready_url), daemon=True).start()
    status = child.wait()
    return 128 - status if status < 0 else status


def _die_with_parent():
    """On Linux, a function that makes the child get SIGKILL when this process dies (SIGKILL, the OOM killer), as
    ``serve run`` did when this command exec'd it, rather than serve on with nobody to stop it; else None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(1, int(signal.SIGKILL))  # 1: PR_SET_PDEATHSIG


def _in_terminal_foreground() -> bool:
    try:
        with open("/dev/tty", "rb") as tty:
            return os.tcgetpgrp(tty.fileno()) == os.getpgrp()
    except OSError:  # no controlling terminal: the signal was sent to this process alone
        return False


#: Seconds a readiness poll waits for its answer. Serve's proxy holds a request until the app's route is up; a poll
#: that gave up after 5 s was logged by the proxy as "Client for request ... disconnected, cancelling request", six
#: lines before the app was ready. A child that dies closes the socket, which ends the wait at once.
HEALTH_WAIT_S = 120


def say_when_ready(child: subprocess.Popen, url: str, every_s: float = 1.0) -> None:
    """Print one line once ``url`` answers 200 while ``child`` runs. Serve's own lines say that the app was
    deployed, not that its models have loaded (a minute on 2 cores), and a search sent before answers 503."""
    direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # localhost: never through a proxy
    while child.poll() is None:
        try:
            with direct.open(url, timeout=HEALTH_WAIT_S) as answer:
                if answer.status == 200:
                    print(f"tessera serve: ready ({url} answers 200)", file=sys.stderr, flush=True)
                    return
        except (urllib.error.URLError, OSError, ValueError):
            pass  # not listening yet, or 503 while the models load
        time.sleep(every_s)
