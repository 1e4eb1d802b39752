"""``tessera serve``'s parent process passes every SIGTERM (and SIGINT sent to it alone) on to its child as SIGINT,
not only the first: the first makes the child drain the requests in flight, the second ends that wait at once. Real
processes, no Ray: the child is a script that reports each SIGINT it gets (the real runner:
tests/serve/test_drain_on_sigterm.py)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHILD = """
import os, signal, sys, time
got = []
signal.signal(signal.SIGINT, lambda signum, frame: (got.append(signum), os.write(1, b"SIGINT\\n")))
os.write(1, b"ready\\n")
while len(got) < 2:
    time.sleep(0.01)
sys.exit(0)
"""
PARENT = "import sys; from flows.commands.serve_process import run_serve; sys.exit(run_serve(sys.argv[1:], {}))"


def next_line(process: subprocess.Popen, timeout_s: float = 15) -> str:
    """The child's next line, or "" when none comes within ``timeout_s`` (one line comes per signal)."""
    ready, _, _ = select.select([process.stdout], [], [], timeout_s)
    return process.stdout.readline().strip() if ready else ""


def test_each_sigterm_reaches_the_child():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT, sys.executable, "-c", CHILD], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)  # no terminal: as systemd
    try:
        assert next_line(parent) == "ready"
        parent.send_signal(signal.SIGTERM)
        assert next_line(parent) == "SIGINT"
        parent.send_signal(signal.SIGTERM)  # the second: before, the parent kept it, and the child waited on
        assert next_line(parent) == "SIGINT"
        assert parent.wait(30) == 0
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait(10)
