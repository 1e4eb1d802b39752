"""A user's own script that runs a flow on Ray through the Python API (no ``tessera`` command, so no handler of
Tessera's for SIGINT or SIGTERM), stopped while its run goes: Ctrl-C gives one ``KeyboardInterrupt``, and a SIGTERM
(Ray's handler: ``sys.exit(15)``) ends it with Ray's note of the signal alone, as a plain Ray script ends (status 15,
or 1 or SIGABRT where Ray's own shutdown races the handler, in a plain script too).

Python 3.11's ``Thread.join``, interrupted by the signal's exception, marks the thread it waited for as ended while it
still runs (python/cpython#90882). The run's follower waited for its worker thread so: the stop that cancels the
stages and waits for them was skipped, their ``FlowCancelled`` failures printed 50 to 180 lines of Ray Data
tracebacks, and at exit the worker thread, seen as ended, was left running in Ray while Ray shut down.

The run's step is a plugin operator that waits (``TESSERA_OPERATORS``), so the signal comes while the stage is inside
its batch, with the follower waiting for it, whatever the machine's load; the process starts a local Ray of its own.
Ctrl-C goes to the process group, as a terminal sends it. SIGTERM goes to the script alone (``kill PID``): sent to the
group (``timeout``), it reaches Ray's own GCS and raylet too, after which Ray's ``ray.shutdown`` at exit aborts
(SIGABRT) in any Ray script, Tessera's or a plain ``ray.init()`` one.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.text_checks import TRACEBACK

REPO = Path(__file__).resolve().parents[2]

PLUGIN = '''
import time

from operators.base import Operator
from operators.interrupt import checkpoint


class Dawdle(Operator):
    """Passes its rows on after a minute, looking at a cancel every 0.1 s; marks its start in a file."""

    name = "dawdle.wait"
    cacheable = False

    def transform(self, table):
        open(MARK, "w").close()
        for _ in range(600):
            checkpoint()
            time.sleep(0.1)
        return table
'''

SCRIPT = """
from flows.api import Flow
from flows.executors.ray_env import ensure_ray

ensure_ray(num_cpus=1, _temp_dir="TEMP/ray")  # what executor="ray" does, in this test's own folder
flow = Flow.load({"name": "dawdle", "steps": {"wait": {"op": "dawdle.wait"}}})
flow.run(["honey bees", "gothic cathedrals"], executor="ray")
print("finished")
"""


def stopped_script(signum: int, *, group: bool) -> tuple[int, list[str]]:
    """The script run by Python in a process group of its own, sent ``signum`` (to the whole group, or to the script
    alone) once its step is inside its batch: the exit status and stderr's lines."""
    temp = tempfile.mkdtemp(prefix="tsi", dir="/tmp")  # short: Ray's socket paths have a length limit
    Path(temp, "dawdle.py").write_text(PLUGIN.replace("MARK", repr(f"{temp}/started")))
    environ = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {
        "PYTHONPATH": f"{REPO}{os.pathsep}{temp}", "TESSERA_OPERATORS": "dawdle", "TESSERA_HOME": f"{temp}/home"}
    try:
        with subprocess.Popen([sys.executable, "-c", SCRIPT.replace("TEMP", temp)], cwd=REPO, env=environ,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) as proc:
            deadline = time.monotonic() + 240
            while not os.path.exists(f"{temp}/started") and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
            assert proc.poll() is None and os.path.exists(f"{temp}/started"), proc.communicate(timeout=60)[1]
            time.sleep(0.5)  # the follower is back in its wait for the worker thread
            (os.killpg if group else os.kill)(proc.pid, signum)
            _, stderr = proc.communicate(timeout=120)
        return proc.returncode, stderr.splitlines()
    finally:
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.ray
@pytest.mark.slow  # a fresh local Ray in a process of its own (about 20 s on 2 cores)
def test_ctrl_c_in_a_script_whose_ray_run_goes_is_one_keyboard_interrupt():
    status, lines = stopped_script(signal.SIGINT, group=True)
    assert status in (1, -signal.SIGINT), (status, lines[-60:])  # Python's -SIGINT; 1 once Ray is imported
    assert lines[-1] == "KeyboardInterrupt" and len(lines) < 40, lines[-60:]  # the traceback of the script's run
    assert not [line for line in lines if "FlowCancelled" in line or "ERROR" in line
                or "Exception ignored" in line], lines[-60:]


@pytest.mark.ray
@pytest.mark.slow  # a fresh local Ray in a process of its own (about 20 s on 2 cores)
def test_sigterm_to_a_script_whose_ray_run_goes_ends_it_as_ray_does():
    status, lines = stopped_script(signal.SIGTERM, group=False)
    # Ray's handler's sys.exit(15), or what Ray 2.60's shutdown then races to: a plain ray.init() script waiting on a
    # task, sent SIGTERM alone, ended 1, 1 and SIGABRT in three runs on 2 loaded cores (2026-12-07), where this test
    # had seen 15 only; Tessera's part is the rest: no traceback, no FlowCancelled, Ray's note alone
    assert status in (signal.SIGTERM, 1, -signal.SIGABRT), (status, lines[-60:])
    assert len(lines) < 15 and "SIGTERM received" in lines[0], lines[-60:]  # Ray's own note of the signal, alone
    assert not [line for line in lines if "FlowCancelled" in line or TRACEBACK in line], lines[-60:]
