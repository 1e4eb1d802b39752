"""Without ``RAY_ADDRESS``, ``--executor ray`` joins the cluster ``ray start`` recorded on this machine, as Ray does.
A real head with token authentication (Ray's default when a token exists) refuses a driver that sends no token:
``tessera run`` said so after about 20 s and 20 lines of Ray's warnings; the check before the run finds that cluster
with Ray's own lookup and asks it first (flows/executors/ray_address.py). The record lives in a Ray temp folder of
the test's own (``RAY_TMPDIR``), never in /tmp/ray; the head runs on free ports and is stopped by its PID. Another
Ray running on the machine (a test session's own) must not add Ray's "Found multiple active Ray instances" line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.ray
@pytest.mark.slow  # starts a Ray head
@pytest.mark.timeout(400)
def test_a_token_cluster_found_on_this_machine_refuses_the_run_in_one_line(ray_cluster_tools, tmp_path):
    with ray_cluster_tools.launch_head(tmp_path / "home", num_cpus=1) as head:
        record = head.temp_dir / "ray_current_cluster"  # what `ray start` writes once its node is up
        deadline = time.monotonic() + 60
        while not record.exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        recorded = record.read_text().strip()
        assert recorded.endswith(head.gcs.rpartition(":")[2])
        (tmp_path / "ray").mkdir()
        (tmp_path / "ray" / "ray_current_cluster").write_text(recorded)  # as /tmp/ray's would be
        env = {name: value for name, value in os.environ.items()
               if name not in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH",
                               "TESSERA_DEBUG")}
        env.update(RAY_TMPDIR=str(tmp_path), TESSERA_HOME=str(tmp_path / "home"))
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "flows", "run", "bm25", "--executor", "ray",
                               "--index", str(tmp_path / "idx"), "--queries", "honey bees"],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        took = time.monotonic() - started
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"tessera: error: cannot join the Ray cluster at {recorded} (RAY_ADDRESS unset: "
                               f"found in {tmp_path / 'ray' / 'ray_current_cluster'}): the cluster refused this "
                               "process (InvalidAuthToken"), lines[0]
    assert "set RAY_AUTH_MODE=token" in lines[0] and took < 15, took
