"""``tessera bench --out s3://...`` resumes as a local --out does: a second benchmark reuses the saved runs and
appends to the MLflow store, and the outputs name the URI's paths, not the temporary copy's. S3 is out of reach
here: pyarrow's in-memory filesystem stands in for the bucket (as in tests/flows/test_uris.py)."""

from __future__ import annotations

import json

import pyarrow.fs as pafs
import pytest

from flows import uris

pytestmark = pytest.mark.data

OUT = "s3://bucket/bench"


@pytest.fixture
def bucket(monkeypatch) -> pafs.FileSystem:
    """An in-memory filesystem that ``s3://`` URIs resolve to; other URIs as before."""
    remote = pafs._MockFileSystem()
    resolve = uris.filesystem

    def in_memory(value: str, field: str):
        return (remote, value.split("://", 1)[1]) if value.startswith("s3://") else resolve(value, field)

    monkeypatch.setattr(uris, "filesystem", in_memory)
    return remote


def read(remote: pafs.FileSystem, path: str) -> bytes:
    with remote.open_input_stream(path) as f:
        return f.read()


def listing(remote: pafs.FileSystem) -> dict[str, int]:
    return {i.path: i.size for i in remote.get_file_info(pafs.FileSelector("bucket", recursive=True))}


def test_a_second_benchmark_into_a_remote_out_reuses_its_runs_and_appends_to_its_mlflow_store(
        bench, bucket, scifact_slice, flow_specs, tmp_path):
    args = ["--dataset", scifact_slice, "--flow", f"title={flow_specs['title']}", "--k", "1,10", "--limit", "5",
            "--out", OUT]
    status, stdout, stderr = bench(*args)  # a first benchmark: nothing to fetch
    assert status == 0, stderr
    first = json.loads(read(bucket, "bucket/bench/bench.json"))["flows"]["title"]
    assert first["cached"] is False
    assert first["run_file"].startswith(f"{OUT}/runs/title-") and first["trec_file"].startswith(f"{OUT}/runs/")
    assert f"{OUT}/report.md" in stdout and f"MLflow: 1 run logged to {OUT}/mlflow.db" in stderr
    assert "tessera-out" not in stdout + stderr

    status, stdout, stderr = bench(*args)
    assert status == 0, stderr
    second = json.loads(read(bucket, "bucket/bench/bench.json"))["flows"]["title"]
    assert second["cached"] is True and second["run_file"] == first["run_file"]
    assert "cached run title-" in stderr and "cached" in stdout and "tessera-out" not in stdout + stderr

    # The store copied up holds both benchmarks' runs, and each run's artifacts are in the bucket beside it.
    from mlflow.tracking import MlflowClient

    store = tmp_path / "mlflow.db"
    store.write_bytes(read(bucket, "bucket/bench/mlflow.db"))
    client = MlflowClient(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name(f"tessera-bench-{scifact_slice.name}")
    logged = client.search_runs([experiment.experiment_id])
    assert sorted(r.data.params["cached"] for r in logged) == ["False", "True"]
    for run in logged:
        report = f"bucket/bench/mlartifacts/{run.info.run_id}/artifacts/report.md"
        assert bucket.get_file_info(report).type == pafs.FileType.File

    # A benchmark that fails copies nothing up: the bucket is as the second one left it.
    before, store_bytes = listing(bucket), read(bucket, "bucket/bench/mlflow.db")
    status, _, stderr = bench("--dataset", scifact_slice, "--flow", "no-such-flow", "--out", OUT)
    assert status == 2 and "no-such-flow" in stderr
    assert listing(bucket) == before and read(bucket, "bucket/bench/mlflow.db") == store_bytes


def test_a_benchmark_that_fails_midway_copies_up_its_finished_runs_and_the_rerun_reuses_them(
        bench, bucket, scifact_slice, flow_specs, tmp_path):
    """The second flow's reranker has nobody to call and fails the run: the first flow's saved run is in the
    bucket all the same (and no half-written file), so the same benchmark does not run that flow again."""
    import socket

    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    broken = tmp_path / "broken.yaml"
    broken.write_text(flow_specs["title"].read_text() + "  api: {op: rerank.api, params: {url: "
                      f"'http://127.0.0.1:{port}/v2/rerank', api_key: x, n: 2, max_retries: 0, on_error: error}}}}\n")
    args = ["--dataset", scifact_slice, "--flow", f"title={flow_specs['title']}", "--k", "1,10", "--limit", "5",
            "--out", OUT]
    status, _, stderr = bench(*args, "--flow", f"broken={broken}", "--no-mlflow")
    assert status != 0 and "broken" in stderr
    saved = [path for path in listing(bucket) if path.startswith("bucket/bench/runs/")]
    assert any(path.split("/")[-1].startswith("title-") for path in saved)
    assert not any(path.endswith(".tmp") for path in saved) and "bucket/bench/bench.json" not in listing(bucket)

    status, _, stderr = bench(*args, "--no-mlflow")
    assert status == 0, stderr
    assert json.loads(read(bucket, "bucket/bench/bench.json"))["flows"]["title"]["cached"] is True
