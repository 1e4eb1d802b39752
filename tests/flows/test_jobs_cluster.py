"""The job entry points submitted to a real local Ray head with ``JobSubmissionClient``: an ingestion of the
bundled sample, a ``flows.run`` of ``hybrid`` over it, a ``flows.bench`` on a small BEIR dataset, a stopped
ingestion, and the Ray metrics they leave on the head's metrics export port.

One head for the module (the flows conftest's ``ray_head``, 2 CPUs): each Ray start costs 10-30 s here. Jobs
upload the repository with ``cluster/runtime_env.yaml``'s excludes, as ``--working-dir .`` would. All slow: a
job starts its own driver and Ray Data actors, and embeds the sample with MiniLM on the shared cores.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.text_checks import TRACEBACK

# The module's cluster starts inside its first test's time: more than the suite's 600 s on a loaded machine.
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample"


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("job-outputs")


@pytest.fixture(scope="module")
def ingested(ray_head, outputs) -> tuple[Path, str]:
    """The sample ingested by a job (dense + BM25, two shards): the index and the job's logs."""
    index = outputs / "sample-index"
    job = ray_head.submit(f"python -m flows.ingest --source data/sample/corpus.jsonl --index {index} "
                          "--shard-size 500", REPO)
    status, logs = ray_head.wait(job)
    assert status == "SUCCEEDED", logs[-3000:]
    return index, logs


def test_an_ingestion_job_writes_the_index_where_it_was_told(ingested):
    from operators.store import Index

    index, logs = ingested
    assert f"{index}: 1000 docs -> " in logs and "in 2 shard(s) (0 already done)" in logs
    # off a terminal the progress is lines, not a bar: the last shard's, in the job's log
    assert "ingest: shard 2/2 committed, 1000/1000 docs, 0 failed" in logs, logs[-3000:]
    opened = Index.open(index)
    assert len(opened.finished_shards()) == 2 and opened.check() == {} and opened.settings.dense


def test_a_run_job_reads_and_writes_through_file_uris(ray_head, ingested, outputs):
    index, _ = ingested
    out = outputs / "hybrid.parquet"
    job = ray_head.submit(f"python -m flows.run hybrid --index file://{index} "
                          f"--queries file://{SAMPLE / 'queries.jsonl'} --out file://{out}", REPO)
    status, logs = ray_head.wait(job)
    assert status == "SUCCEEDED", logs[-3000:]
    assert "[1/" in logs and "(retrieve.bm25) done" in logs and "(retrieve.dense) done" in logs
    assert f"rows to file://{out}" in logs
    results = pq.read_table(out)
    assert sorted(set(results.column("qid").to_pylist())) == ["q1", "q2", "q3", "q4"]

    # Section 4: the run's per-step series, exported by the head's metrics agent (after a flush interval).
    rows = ray_head.node.wait_for_series("ray_tessera_step_rows_out_total", flow="hybrid", step="bm25")
    assert rows and sum(rows) > 0, ray_head.node.metrics()[-3000:]
    assert ray_head.node.series("ray_tessera_step_seconds_count", flow="hybrid", op="retrieve.dense")
    assert ray_head.node.series("ray_tessera_step_batches_total", flow="hybrid")
    shards = ray_head.node.wait_for_series("ray_tessera_ingest_shards_total", index=index.name)
    assert sum(shards) == 2
    assert sum(ray_head.node.series("ray_tessera_ingest_docs_total", index=index.name)) == 1000


def test_an_unsupported_scheme_fails_the_job_in_one_line(ray_head, outputs):
    job = ray_head.submit(f"python -m flows.run bm25 --index {outputs} --queries data/sample/queries.jsonl "
                          "--out ftp://host/results.parquet", REPO)
    status, logs = ray_head.wait(job)
    errors = [line for line in logs.splitlines() if line.startswith("tessera: ")]
    assert status == "FAILED" and TRACEBACK not in logs and len(errors) == 1, logs[-3000:]
    assert "field '--out'" in errors[0] and "'ftp://' is not supported" in errors[0]


@pytest.fixture(scope="module")
def small_beir(outputs) -> Path:
    """A BEIR-layout dataset from the sample: 300 documents, its 4 queries, qrels by a keyword of each."""
    root = outputs / "sample-beir"
    (root / "qrels").mkdir(parents=True)
    keywords = {"q1": "honey", "q2": "opera", "q3": "immune", "q4": "cathedral"}
    docs = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    kept = [d for i, d in enumerate(docs) if i < 250 or any(k in d["text"].lower() for k in keywords.values())][:300]
    qrels = [f"{qid}\t{d['_id']}\t1" for qid, word in keywords.items() for d in kept if word in d["text"].lower()]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in kept), encoding="utf-8")
    (root / "queries.jsonl").write_text((SAMPLE / "queries.jsonl").read_text(encoding="utf-8"), encoding="utf-8")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n",
                                             encoding="utf-8")
    return root


def test_a_bench_job_writes_its_report_where_it_was_told(ray_head, small_beir, outputs):
    out = outputs / "bench"
    job = ray_head.submit(f"python -m flows.bench --dataset file://{small_beir} --flow bm25=bm25 "
                          f"--out {out} --executor ray --no-mlflow --k 1,3,10 --index-dir {outputs / 'auto'}", REPO)
    status, logs = ray_head.wait(job)
    assert status == "SUCCEEDED", logs[-3000:]
    assert f"report: {out}/report.md" in logs
    metrics = json.loads((out / "metrics.json").read_text())
    assert "bm25" in json.dumps(metrics) and (out / "report.md").is_file()


def test_stopping_an_ingestion_job_leaves_only_committed_shards(ray_head, outputs, committed_docnos):
    """``ray job stop`` during an ingestion: the job stops, and the index holds whole committed shards only
    (one chunk a document, 100 documents a shard), each intact by the index's own check."""
    from operators.store import Index

    index = outputs / "stopped-index"
    job = ray_head.submit(f"python -m flows.ingest --source data/sample/corpus.jsonl --index {index} "
                          "--shard-size 100 --no-chunk", REPO)
    client = ray_head.client()
    deadline = time.monotonic() + 300
    while not _committed(index) and time.monotonic() < deadline:  # stop it mid-way: after its first commit
        assert not client.get_job_status(job).is_terminal(), client.get_job_logs(job)[-3000:]
        time.sleep(0.5)
    assert client.stop_job(job)
    stopped_at = time.monotonic()
    while not client.get_job_status(job).is_terminal():
        assert time.monotonic() - stopped_at < 120, "the job did not stop"
        time.sleep(0.5)
    assert str(client.get_job_status(job)) == "STOPPED"

    opened = Index.open(index)
    shards = opened.finished_shards()
    assert 1 <= len(shards) < 10 and opened.check() == {}
    docnos = committed_docnos(index)
    source = {json.loads(line)["_id"] for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()}
    assert len(docnos) == len(set(docnos)) == 100 * len(shards) and set(docnos) <= source


def _committed(index: Path) -> bool:
    try:
        return bool(json.loads((index / "manifest.json").read_text()).get("shards"))
    except (OSError, ValueError):
        return False
