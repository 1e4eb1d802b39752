"""Jobs on a real two-node Ray cluster on this machine: a head and a second node (``ray start --address``) with a
custom resource ``node2``, each with its own temp dir and metrics export port, one CPU each (they share the host's
cores). That work ran on both nodes is read from each node's own metrics export: a node's agent exports only
the series of the workers it runs. Then the second node's raylet is killed (SIGKILL, by PID) during an
ingestion: the job finishes on the head or fails with a clear error, and the index holds committed shards only.

All slow: two Ray starts (10-30 s each here), jobs that embed with MiniLM on one CPU per node.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

# The module's cluster starts inside its first test's time: more than the suite's 600 s on a loaded machine.
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"


@pytest.fixture(scope="module")
def cluster(ray_cluster_tools, tmp_path_factory):
    """``(head, second node)``: the module's two-node cluster."""
    tools = ray_cluster_tools
    with tools.launch_head(tmp_path_factory.mktemp("home"), num_cpus=1) as head, \
            tools.join_node(head, "node2", num_cpus=1) as node2:
        yield head, node2


def test_ingestion_and_a_batch_flow_run_on_both_nodes(cluster, tmp_path):
    head, node2 = cluster
    index = tmp_path / "sample-index"
    status, logs = head.wait(head.submit(f"python -m flows.ingest --source data/sample/corpus.jsonl --index {index} "
                                         "--shard-size 250", REPO))
    assert status == "SUCCEEDED", logs[-3000:]
    assert "1000 docs -> " in logs and "in 4 shard(s)" in logs
    # The sample's questions asked 150 times each (distinct qids): 600 queries are three blocks of the
    # retrievers' 256, run at once, so the one-CPU head cannot take them all.
    sample = [json.loads(line) for line in (SAMPLE / "queries.jsonl").read_text().splitlines() if line.strip()]
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"_id": f"{q['_id']}-{i}", "text": q["text"]}) + "\n"
                               for i in range(600 // len(sample)) for q in sample))
    out = tmp_path / "hybrid.parquet"
    status, logs = head.wait(head.submit(f"python -m flows.run hybrid --index {index} --queries {queries} "
                                         f"--out {out}", REPO))
    assert status == "SUCCEEDED", logs[-3000:]
    assert pq.read_table(out).column("qid").unique().to_pylist() == [json.loads(line)["_id"] for line in
                                                                      queries.read_text().splitlines()]

    for node in (head.node, node2):  # each node's agent exports its own workers' series
        embedded = node.wait_for_series("ray_tessera_ingest_chunks_embedded_total", index=index.name)
        assert embedded and sum(embedded) > 0, node.metrics()[-2000:]
        assert node.wait_for_series("ray_tessera_step_batches_total", flow="hybrid"), node.metrics()[-2000:]
    both = sum(head.node.series("ray_tessera_ingest_chunks_embedded_total", index=index.name)) + \
        sum(node2.series("ray_tessera_ingest_chunks_embedded_total", index=index.name))
    assert both >= 1000  # every chunk embedded somewhere, some on each node


def test_a_node_killed_mid_ingestion_leaves_a_finished_job_or_a_clear_error(cluster, tmp_path, committed_docnos):
    """Both embed actors busy (one a node, one CPU each), the second node's raylet is killed. Either Ray Data
    moves the lost actor's shards to the head and the job succeeds with every document once (what happened in
    the runs so far), or the ingestion's node watch gives up after its grace period (30 s here) in one line;
    either way committed shards stay whole. Last in the module: the second node is gone afterwards."""
    from operators.store import Index

    head, node2 = cluster
    index = tmp_path / "killed-index"
    job = head.submit(f"python -m flows.ingest --source data/sample/corpus.jsonl --index {index} "
                      "--shard-size 100 --no-chunk", REPO, TESSERA_NODE_LOSS_GRACE_S="30")
    client = head.client()
    deadline = time.monotonic() + 300
    while not _committed(index):  # both embed actors (one a node, one CPU each) are busy: kill one mid-shard
        assert time.monotonic() < deadline and not client.get_job_status(job).is_terminal(), \
            client.get_job_logs(job)[-3000:]
        time.sleep(1)
    os.kill(node2.raylet_pid(), signal.SIGKILL)
    status, logs = head.wait(job, timeout=500)

    opened = Index.open(index)
    assert opened.check() == {}
    docnos = committed_docnos(index)
    source = [json.loads(line)["_id"] for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(docnos) == len(set(docnos)) and set(docnos) <= set(source)
    if status == "SUCCEEDED":
        assert sorted(docnos) == sorted(source), logs[-3000:]
    else:
        errors = [line for line in logs.splitlines() if line.startswith("tessera: ")]
        assert status == "FAILED" and len(errors) == 1, logs[-3000:]
        assert "died during the ingestion" in errors[0] and "run the same command again" in errors[0], errors[0]
        assert len(docnos) == 100 * len(opened.finished_shards())


def _committed(index: Path) -> bool:
    try:
        return bool(json.loads((index / "manifest.json").read_text()).get("shards"))
    except (OSError, ValueError):
        return False
