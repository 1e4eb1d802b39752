"""A process that exits while a Ray run still goes (what a second Ctrl-C or SIGTERM leaves: the run's threads run on
without their caller) stops the run before Ray's own ``ray.shutdown`` at exit (flows/executors/ray_env.py). Its
threads called Ray after the shutdown: Ray joined the cluster again from a worker thread ("SIGTERM handler is not
set because current thread is not the main thread", "Connecting to existing Ray cluster at address" where one runs),
and Ray Data's stats raised ``RuntimeError: Ray is not initialized``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.flows.test_ray_after_shutdown import script_with_its_own_ray
from tests.text_checks import TRACEBACK

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import os, sys, threading, time
from flows.executors.ray_data import RayDataExecutor
from flows.executors.ray_env import ensure_ray
from tests.flows.ray_flows import flow_by_hand
from tests.flows.test_cancel import SlowModel

ensure_ray(num_cpus=1, _temp_dir="TEMP/ray")
flow = flow_by_hand("slow", [("slow", SlowModel({"passes": 200, "seconds": 0.1, "trace": "TEMP/trace"}), None)])

def run():
    try:
        RayDataExecutor().run(flow, ["a", "b"])
    except BaseException as err:
        print("run:", type(err).__name__, err, flush=True)

threading.Thread(target=run, daemon=True).start()
while not os.path.exists("TEMP/trace"):  # the step is in its batch
    time.sleep(0.1)
sys.exit(0)
"""


@pytest.mark.ray
@pytest.mark.slow  # a fresh local Ray in a process of its own
def test_a_process_exiting_while_its_ray_run_goes_stops_the_run_before_ray(tmp_path):
    done = script_with_its_own_ray(SCRIPT, "tse", lambda _: {"TESSERA_HOME": str(tmp_path / "home"),
                                                              "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = done.stdout.strip()  # named by its step once the stage ran, or not yet (a race at exit)
    assert outcome in ("run: FlowCancelled step 'slow': Ray is shutting down",
                       "run: FlowCancelled Ray is shutting down"), outcome
    for said in ("not the main thread", "Connecting to existing Ray cluster", "Started a local Ray instance",
                 "Ray is not initialized", TRACEBACK, "core worker has already been shutdown"):
        assert said not in done.stderr, done.stderr[-3000:]
