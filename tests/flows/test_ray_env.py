"""Starting Ray the Tessera way (``flows.executors.ray_env.ensure_ray``): quiet, Ray's secure defaults kept."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTICE = "Token authentication is enabled for this Ray cluster"


def start_and_stop(start: str) -> subprocess.CompletedProcess:
    """A fresh process that starts a local Ray with ``start`` (in its own temp dir), then shuts it down."""
    temp = tempfile.mkdtemp(prefix="tsq", dir="/tmp")  # short: Ray's socket paths have a length limit
    script = ("import logging, ray\nfrom flows.executors.ray_env import ensure_ray\n"
              f"{start}\nassert ray.is_initialized()\nray.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS")}  # Ray's defaults
    try:
        return subprocess.run([sys.executable, "-c", script.replace("TEMP", temp)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=180)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.ray
def test_ray_started_by_tessera_prints_no_token_auth_notice():
    """Ray 2.60 warns about token authentication on every ``ray.init()`` of a new local cluster: a note for
    cluster operators that ``--quiet`` must not print. A bare ``ray.init()`` shows the notice is live here."""
    bare = start_and_stop("ray.init(num_cpus=1, include_dashboard=False, logging_level=logging.WARNING, "
                          "_temp_dir='TEMP')")
    assert bare.returncode == 0 and NOTICE in bare.stderr, bare.stderr
    ours = start_and_stop("ensure_ray(num_cpus=1, _temp_dir='TEMP')")
    assert ours.returncode == 0, ours.stderr
    assert "Token authentication" not in ours.stderr + ours.stdout
