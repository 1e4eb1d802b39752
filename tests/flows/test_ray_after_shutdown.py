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


@pytest.mark.ray
@pytest.mark.slow  # two fresh local Rays in a process of its own (about 35 s on 2 cores)
def test_a_ray_run_after_ray_shutdown_starts_a_new_ray_and_runs():
    temp = tempfile.mkdtemp(prefix="tsd", dir="/tmp")  # short: Ray's socket paths have a length limit
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS",)}
    env["TESSERA_HOME"] = f"{temp}/home"
    try:
        done = subprocess.run([sys.executable, "-c", SCRIPT.replace("TEMP", temp)], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-2000:]
    first, second = json.loads(done.stdout.strip().splitlines()[-1])
    assert first == second > 0
