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
QUIETED = "ray._private.authentication.authentication_token_setup"


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


def test_the_notice_comes_from_the_logger_tessera_quiets():
    """Ray 2.60 warns about token authentication on every ``ray.init()`` of a new local cluster: a note for
    cluster operators that ``--quiet`` must not print. It is logged through the logger ``ensure_ray`` quiets."""
    import logging

    from ray._private.authentication import authentication_token_setup as setup

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger(QUIETED)  # Ray's loggers do not propagate to the root (caplog's) logger
    level, logger.level = logger.level, logging.WARNING  # as Ray leaves it (another test may have quieted it)
    logger.addHandler(handler)
    try:
        setup._warn_token_auth_enabled()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    assert [r.name for r in records if NOTICE in r.getMessage()] == [QUIETED]


@pytest.mark.ray
@pytest.mark.slow  # a fresh local Ray in a process of its own (about 25 s); test_the_notice_comes_from_the_logger_
# tessera_quiets and test_ensure_ray_raises_that_logger_to_errors_only keep the quieting itself in make test
def test_ray_started_by_tessera_prints_no_token_auth_notice_and_runs_its_workers_at_the_drivers_niceness():
    ours = start_and_stop("ensure_ray(num_cpus=1, _temp_dir='TEMP')\nimport os\n"
                          "assert ray.get(ray.remote(lambda: os.nice(0)).remote()) == os.nice(0)")  # Ray's own: 15
    assert ours.returncode == 0, ours.stderr
    assert "Token authentication" not in ours.stderr + ours.stdout


def test_ensure_ray_raises_that_logger_to_errors_only():
    assert logging_level_of(QUIETED) == "ERROR"


def logging_level_of(name: str) -> str:
    import logging

    from flows.executors import ray_env

    before = logging.getLogger(name).level
    try:
        ray_env._quiet_start_up()
        return logging.getLevelName(logging.getLogger(name).getEffectiveLevel())
    finally:
        logging.getLogger(name).setLevel(before)
