"""A worker node that lacks what the driver's node has: jobs on a real two-node Ray cluster on this machine whose
second node has a ``TESSERA_HOME`` of its own, as a node of another machine does.

The head runs the job drivers and no steps (no CPUs); the second node runs every step. A trained model and a named
index exist only in the head's ``TESSERA_HOME``, so the driver's checks pass and the steps fail on the worker. The
job's error names the step, and the node it was raised on (its ``TESSERA_HOME`` path is not the driver's): it
reached the driver without either, as ``model 'mine' is not ... a model trained into <the worker's home>/models
(which does not exist yet; tessera train)``. Also: a shell joins the running cluster with ``--executor ray``
through ``RAY_ADDRESS``, and without ``RAY_AUTH_MODE=token`` is refused in one line, without Ray's warnings.

All slow: two Ray starts (10-30 s each here) and jobs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.text_checks import TRACEBACK

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[2]
WORKER_NODE = "on the Ray node at "


@pytest.fixture(scope="module")
def cluster(ray_cluster_tools, tmp_path_factory, bm25_index):
    """``(head, its TESSERA_HOME)``: a head with no CPUs and a worker node with 2 and a ``TESSERA_HOME`` of its own.
    The head's home holds a model ``mine`` (the packaged MiniLM's folder) and an index named ``sample``."""
    from operators.models.references import resolve_model_path

    home = tmp_path_factory.mktemp("head-home")
    (home / "models").mkdir()
    (home / "models" / "mine").symlink_to(resolve_model_path("all-MiniLM-L6-v2"))
    (home / "indices").mkdir()
    (home / "indices" / "sample").symlink_to(bm25_index)
    worker_home = tmp_path_factory.mktemp("worker-home")
    with ray_cluster_tools.launch_head(home, num_cpus=0) as head, \
            ray_cluster_tools.join_node(head, "worker", num_cpus=2, TESSERA_HOME=str(worker_home)):
        yield head, home


def error_line(head, entrypoint: str) -> str:
    status, logs = head.wait(head.submit(entrypoint, REPO))
    errors = [line for line in logs.splitlines() if line.startswith("tessera: ")]
    assert status == "FAILED" and TRACEBACK not in logs and len(errors) == 1, logs[-3000:]
    return errors[0]


def test_a_model_the_worker_node_lacks_names_the_step_and_the_node(cluster, tmp_path):
    head, _ = cluster
    spec = tmp_path / "embed_mine.yaml"  # embeds the queries: no index needed
    spec.write_text("name: embed_mine\nsteps:\n  emb: {op: embed.sentence_transformer, "
                    "params: {model: mine, input_column: query}}\n")
    line = error_line(head, f"python -m flows.run {spec} --queries data/sample/queries.jsonl "
                            f"--out {tmp_path / 'out.parquet'}")
    assert line.startswith("tessera: error: step 'emb', operator 'embed.sentence_transformer': model 'mine' "), line
    assert WORKER_NODE in line and "not the driver's node: it reads its own TESSERA_HOME" in line
    assert not (tmp_path / "out.parquet").exists()


def test_an_index_name_resolves_on_the_node_that_reads_it(cluster, tmp_path):
    head, home = cluster
    line = error_line(head, "python -m flows.run bm25 --index sample --queries data/sample/queries.jsonl "
                            f"--out {tmp_path / 'out.parquet'} --no-cache")
    assert line.startswith("tessera: error: step 'bm25', operator 'retrieve.bm25', field 'params.index': "), line
    assert f"{home}/indices/sample" not in line and WORKER_NODE in line


def test_a_shell_joins_the_running_cluster_through_ray_address_and_its_token(cluster, bm25_index, tmp_path):
    head, _ = cluster
    env = {**head.env, "RAY_ADDRESS": head.gcs, "TESSERA_HOME": str(tmp_path / "shell-home")}
    env.pop("RAY_AUTH_MODE", None)
    command = [sys.executable, "-m", "flows", "run", "bm25", "--executor", "ray", "--index", str(bm25_index),
               "--queries", "gothic architecture", "--json"]

    def run(**extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(command, cwd=REPO, env={**env, **extra}, capture_output=True, text=True, timeout=300)

    refused = run()  # the cluster has token authentication on: the driver must send the token
    lines = refused.stderr.strip().splitlines()  # Tessera's line alone: asked before ray.init, whose GCS client
    assert refused.returncode == 2 and len(lines) == 1, refused.stderr[-3000:]  # warned for 20 s (50 lines)
    assert lines[0].startswith(f"tessera: error: field 'RAY_ADDRESS': cannot join RAY_ADDRESS '{head.gcs}': the "
                               "cluster refused this process (InvalidAuthToken: "), lines[0]
    assert "set RAY_AUTH_MODE=token" in lines[0]
    joined = run(RAY_AUTH_MODE="token")
    assert joined.returncode == 0, joined.stderr[-3000:]
    result = json.loads(joined.stdout)
    assert "(ray)" in result["description"] and result["rows"][0]["title"] == "Gothic architecture"
