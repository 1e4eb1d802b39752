"""A notebook's Ray runs after ``ray.shutdown()``: docs/python.md says it ends the local Ray that ``executor="ray"``
started, and the next Ray run starts another. That run failed with Ray's "Can't find actor" (the run's progress
reporter was kept by job id, and a new local cluster's first job has the same id as the last one's)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import pytest

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, ray
from flows.api import Flow, ingest
from flows.executors.ray_env import ensure_ray
from operators.testing import sample_documents

with open("TEMP/corpus.jsonl", "w") as f:
    for d in sample_documents(20).to_pylist():
        f.write(json.dumps({"_id": d["docno"], "title": d["title"], "text": d["text"]}) + "\\n")
flow = Flow.load("bm25", index=ingest("TEMP/corpus.jsonl", "TEMP/idx", settings={"dense": False}, progress=False))
rows = []
for _ in range(2):
    ensure_ray(num_cpus=1, _temp_dir="TEMP/ray")  # what flow.run(executor="ray") does, in this test's own folder
    rows.append(flow.run("classical music", executor="ray").table.num_rows)
    ray.shutdown()
print(json.dumps(rows))
"""


def script_with_its_own_ray(script: str, prefix: str, env: Callable[[str], dict[str, str]]):
    """``script`` run by Python in a process of its own, from the checkout, with ``TEMP`` in it a fresh folder
    (short: Ray's socket paths have a length limit) for the local Ray it starts, removed after; ``env(temp)`` adds
    to the environment, which joins no cluster (no ``RAY_ADDRESS``)."""
    temp = tempfile.mkdtemp(prefix=prefix, dir="/tmp")
    environ = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | env(temp)
    try:
        return subprocess.run([sys.executable, "-c", script.replace("TEMP", temp)], cwd=REPO, env=environ,
                              capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.ray
@pytest.mark.slow  # two fresh local Rays in a process of its own (about 35 s on 2 cores)
def test_a_ray_run_after_ray_shutdown_starts_a_new_ray_and_runs():
    done = script_with_its_own_ray(SCRIPT, "tsd", lambda temp: {"TESSERA_HOME": f"{temp}/home"})
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = json.loads(done.stdout.strip().splitlines()[-1])
    assert first == second > 0
