"""``tessera serve``'s parent process passes every SIGTERM (and SIGINT sent to it alone) on to its child as SIGINT,
not only the first: the first makes the child drain the requests in flight, the second ends that wait at once. Real
processes, no Ray: the child is a script that reports each SIGINT it gets (the real runner:
tests/serve/test_drain_on_sigterm.py)."""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

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


def readable(stream, timeout_s: float) -> bool:
    """Whether ``stream`` has something to read within ``timeout_s``; by epoll, not ``select.select``, which refuses
    a descriptor over 1024 (a test worker that made many servers before this test holds that many)."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        return bool(selector.select(timeout_s))


def next_line(process: subprocess.Popen, timeout_s: float = 15) -> str:
    """The child's next line, or "" when none comes within ``timeout_s`` (one line comes per signal)."""
    return process.stdout.readline().strip() if readable(process.stdout, timeout_s) else ""


@pytest.mark.process
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


#: A child that answers /healthz on the port it is given 503 twice (the models loading), then 200, and stops at
#: SIGINT, saying how many polls it answered.
HEALTH_CHILD = """
import http.server, os, signal, sys, threading
asked = []
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        asked.append(self.path)
        self.send_response(200 if len(asked) > 2 else 503)
        self.end_headers()
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health)
signal.signal(signal.SIGINT, lambda signum, frame: threading.Thread(target=server.shutdown).start())
server.serve_forever()
os.write(1, f"{len(asked)}\\n".encode())
"""
#: A child whose /healthz answers 200, the first time after 6 s (Serve's proxy holding a request until the app's
#: route is up), and stops at SIGINT, saying how many polls it answered.
SLOW_HEALTH_CHILD = HEALTH_CHILD.replace("        asked.append(self.path)\n", "        asked.append(self.path)\n"
                                         "        import time; time.sleep(6 if len(asked) == 1 else 0)\n"
                                         ).replace("len(asked) > 2", "True")
#: The parent as ``tessera serve`` runs it, but polling every 0.1 s instead of every second (``say_when_ready``'s
#: ``every_s``): what is polled and said does not depend on the interval, and the test waited 3 s for three polls.
PARENT_READY = ("import functools, sys; from flows.commands import serve_process; "
                "serve_process.say_when_ready = functools.partial(serve_process.say_when_ready, every_s=0.1); "
                "sys.exit(serve_process.run_serve(sys.argv[2:], {}, "
                "ready_url=f'http://127.0.0.1:{sys.argv[1]}/healthz'))")


@contextlib.contextmanager
def polling_parent(child: str) -> Iterator[tuple[subprocess.Popen, str]]:
    """``PARENT_READY`` running ``child`` (a health server's source) on a free port: the parent and the port; killed
    with its group if it is still running after."""
    with socket.socket() as probe:  # a free port for the child's server
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    parent = subprocess.Popen([sys.executable, "-c", PARENT_READY, port, sys.executable, "-c", child, port],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        yield parent, port
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait(10)


@pytest.mark.process
def test_one_line_says_when_the_app_first_answers_its_health_check():
    """Serve's own lines say that the app was deployed, not that its models have loaded: a search sent then got a 503.
    The parent polls the app's /healthz and says once when it answers 200."""
    with polling_parent(HEALTH_CHILD) as (parent, port):
        assert readable(parent.stderr, 30) and parent.stderr.readline().strip() == \
            f"tessera serve: ready (http://127.0.0.1:{port}/healthz answers 200)"
        parent.send_signal(signal.SIGTERM)
        assert next_line(parent) == "3"  # two 503s, one 200, and no poll after it
        assert parent.wait(30) == 0 and parent.stderr.read() == ""  # said once


@pytest.mark.process
def test_a_slow_health_answer_is_waited_for_not_abandoned():
    """A poll that gave up after 5 s left Serve's proxy logging "Client for request ... disconnected, cancelling
    request", six lines at each start, read as failed requests."""
    with polling_parent(SLOW_HEALTH_CHILD) as (parent, _):
        assert readable(parent.stderr, 30) and "answers 200" in parent.stderr.readline()
        parent.send_signal(signal.SIGTERM)
        assert next_line(parent) == "1"  # one poll, answered
        assert parent.wait(30) == 0
