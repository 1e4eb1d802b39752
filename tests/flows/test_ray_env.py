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
    # Ray's defaults (the session's ray_session sets the niceness, which ensure_ray must set itself)
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_AUTH_MODE", "RAY_ADDRESS", "RAY_worker_niceness")}
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


def no_cpu_warning() -> str:
    """The warning Ray Data's ``Dataset._execute`` logs when a dataset starts while no CPU is free, read from the
    installed Ray's source (so a Ray that rewords it fails here, not silently on a user's terminal)."""
    import ast
    import inspect

    import ray.data.dataset

    [execute] = [node for node in ast.walk(ast.parse(inspect.getsource(ray.data.dataset)))
                 if isinstance(node, ast.FunctionDef) and node.name == "_execute"]  # decorated: no __wrapped__
    texts = [node.args[0].value for node in ast.walk(execute) if isinstance(node, ast.Call)
             and getattr(node.func, "attr", None) == "warning" and isinstance(node.args[0], ast.Constant)]
    [text] = [t for t in texts if "available CPUs" in t]
    return text


def records_of(logger_name: str, *messages: str) -> list[str]:
    """The messages a handler on ``logger_name`` receives when each of ``messages`` is logged there as a warning."""
    import logging

    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())
    logger = logging.getLogger(logger_name)
    level, logger.level = logger.level, logging.WARNING
    logger.addHandler(handler)
    try:
        for message in messages:
            logger.warning(message)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return seen


def test_ray_datas_no_cpu_warning_is_dropped_while_a_tessera_run_goes_and_only_then():
    """On 2 cores a run's later stage can start while its earlier ones hold every CPU: Ray Data then warns that
    the job "will hang", which it does not. ``quiet_ray_data`` (around every Ray run and Ray ingestion) drops that
    one warning of that one logger, for as long as a run goes; other warnings pass."""
    import ray.data.dataset

    from flows.executors.ray_env import _NO_CPU_LOGGER, quiet_ray_data

    warning, other = no_cpu_warning(), "Warning: something else about CPUs"
    assert ray.data.dataset.logger.name == _NO_CPU_LOGGER
    assert records_of(_NO_CPU_LOGGER, warning, other) == [warning, other]
    with quiet_ray_data():
        assert records_of(_NO_CPU_LOGGER, warning, other) == [other]
        with quiet_ray_data():  # a second run overlapping the first
            pass
        assert records_of(_NO_CPU_LOGGER, warning) == []  # still dropped: the first run goes on
    assert records_of(_NO_CPU_LOGGER, warning) == [warning]  # the user's own Ray Data jobs keep it


@pytest.mark.ray
@pytest.mark.slow  # a fresh local Ray in a process of its own, as above
def test_ray_started_early_on_a_thread_is_the_one_ensure_ray_then_uses():
    """An ingestion starts Ray on a thread while it stages (``start_ray_early``); ``ensure_ray`` waits for it, and
    the cluster works on after the start. Ray's note that a start off the main thread sets no SIGTERM handler is
    not shown, and the program's handler stays."""
    ours = start_and_stop("import signal, threading\nfrom flows.executors.ray_env import start_ray_early\n"
                          "handler = lambda *a: None\nsignal.signal(signal.SIGTERM, handler)\n"
                          "start_ray_early(num_cpus=1, _temp_dir='TEMP')\n"
                          "assert 'tessera-ray-start' in [t.name for t in threading.enumerate()]\n"
                          "ensure_ray(num_cpus=1, _temp_dir='TEMP')\n"
                          "assert signal.getsignal(signal.SIGTERM) is handler\n"
                          # the cluster outlives its start: its GCS once died with the thread that started it
                          "import time\ntime.sleep(2)\n"
                          "assert ray.get(ray.remote(lambda: 7).remote(), timeout=60) == 7")
    assert ours.returncode == 0, ours.stderr
    assert "SIGTERM handler is not set" not in ours.stderr


@pytest.mark.process
def test_an_early_start_that_fails_raises_in_ensure_ray():
    """A Ray address nothing answers at: the early start's failure is raised where the work wants Ray."""
    script = ("import os\nos.environ['RAY_ADDRESS'] = '127.0.0.1:9'\n"
              "from flows.executors.ray_address import RayAddressError\n"
              "from flows.executors.ray_env import ensure_ray, start_ray_early\n"
              "start_ray_early()\n"
              "try:\n    ensure_ray()\nexcept RayAddressError as err:\n    print('refused:', err)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused:") and "127.0.0.1:9" in done.stdout
