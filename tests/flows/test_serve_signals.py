"""``tessera serve`` stops the way ``serve run`` does on Ctrl-C, on SIGTERM too (what systemd and Kubernetes send):
the app is deleted, Serve shut down, and the command exits 0. Before, SIGTERM reached Ray's own handler (a stack
dump, status 134, no graceful shutdown). Started the way a script's ``tessera serve &`` is, with SIGINT ignored,
it still stops on SIGINT sent to it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.flows.conftest import end_group, free_ports, service_only_config, wait_until_answering

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
def test_tessera_serve_shuts_down_gracefully_on_sigterm_and_sigint(tmp_path, stop):
    path, port = service_only_config(tmp_path / "config.yaml")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TESSERA_API_KEYS")}
    env["TESSERA_HOME"] = str(tmp_path / "home")
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        serving = subprocess.Popen([sys.executable, "-m", "flows", "serve", "--config", str(path), "--address",
                                    "local"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True,  # its own group: the cleanup below ends all of it
                                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # as `cmd &`
        try:
            wait_until_answering(serving, f"http://127.0.0.1:{port}/tasks", log_path)
            serving.send_signal(stop)  # to the command's own process, by its PID
            status = serving.wait(120)
        finally:
            end_group(serving)  # and whatever of its Ray is left
    text = log_path.read_text()
    assert status == 0, text[-3000:]
    assert "Got KeyboardInterrupt, shutting down" in text  # serve run's own graceful path
    assert "SIGTERM received" not in text
    with pytest.raises(requests.ConnectionError):
        requests.get(f"http://127.0.0.1:{port}/tasks", timeout=5)


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended, its parent has not collected it yet


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_serve_run_dies_with_a_killed_tessera_serve(tmp_path):
    """SIGKILL of the command (what the OOM killer sends) takes its `serve run` child with it, as when it exec'd."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TESSERA_API_KEYS")}
    env["TESSERA_HOME"] = str(tmp_path / "home")
    serving = subprocess.Popen([sys.executable, "-m", "flows", "serve", "--port", str(free_ports(1)[0]), "--address",
                                "local"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (children := _children(serving.pid)):
            assert serving.poll() is None and time.monotonic() < deadline, "serve run never started"
            time.sleep(0.2)
        (child,) = children
        serving.kill()
        serving.wait(30)
        deadline = time.monotonic() + 60
        while _alive(child):
            assert time.monotonic() < deadline, "serve run outlived the command"
            time.sleep(0.2)
    finally:
        end_group(serving)
