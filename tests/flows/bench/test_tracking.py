"""MLflow: a benchmark's runs land in the default SQLite store under --out, or in a SQLite URI of one's own,
are read back with MlflowClient, and (where MLflow's UI is installed) are served by ``mlflow ui``."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.data


def read_back(uri: str, dataset: str) -> dict:
    """``{run name: run}`` of the benchmark's experiment, through MlflowClient."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(f"tessera-bench-{dataset}")
    assert experiment is not None, f"no experiment in {uri}"
    return {run.info.run_name: run for run in client.search_runs([experiment.experiment_id])}


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """The working directory of the run: nothing of MLflow's may land here."""
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def bench_two_flows(bench, scifact_slice, flow_specs, out: Path, *extra: str) -> dict:
    status, _, stderr = bench("--dataset", scifact_slice, "--flow", f"title={flow_specs['title']}",
                              "--flow", f"notitle={flow_specs['notitle']}", "--k", "1,10", "--out", out, "--quiet",
                              *extra)
    assert status == 0, stderr
    return json.loads((out / "metrics.json").read_text())


def test_the_default_store_is_sqlite_under_out_and_reads_back(bench, scifact_slice, flow_specs, tmp_path, elsewhere):
    out = tmp_path / "out"
    metrics = bench_two_flows(bench, scifact_slice, flow_specs, out)
    runs = read_back(f"sqlite:///{out}/mlflow.db", scifact_slice.name)
    assert set(runs) == {"title", "notitle"}
    assert runs["title"].data.metrics["nDCG_at_10"] == pytest.approx(metrics["title"]["nDCG@10"])
    assert runs["notitle"].data.params["ks"] == "1,10"
    root = Path(__file__).resolve().parents[3]
    if (root / ".git").exists():  # a checkout (CI's clone): the commit behind the figures is recorded
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=root).stdout.strip()
        changed = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                                 text=True, check=True, cwd=root).stdout.strip()
        assert runs["title"].data.tags["tessera.commit"] == head
        tessera = json.loads((out / "bench.json").read_text())["tessera"]
        assert tessera["commit"] == head and tessera["dirty"] == bool(changed)
    from mlflow.tracking import MlflowClient

    artifacts = {a.path for a in MlflowClient(f"sqlite:///{out}/mlflow.db").list_artifacts(runs["title"].info.run_id)}
    assert artifacts >= {"report.md", "metrics.png", "metrics.json"}
    assert (out / "mlartifacts").is_dir() and not list(elsewhere.iterdir())


def test_a_sqlite_uri_of_ones_own_keeps_its_artifacts_beside_it(bench, scifact_slice, flow_specs, tmp_path, elsewhere):
    store = tmp_path / "store"
    store.mkdir()
    uri = f"sqlite:///{store}/mlflow.db"
    bench_two_flows(bench, scifact_slice, flow_specs, tmp_path / "out", "--mlflow-uri", uri)
    runs = read_back(uri, scifact_slice.name)
    assert set(runs) == {"title", "notitle"}
    assert runs["title"].info.artifact_uri.startswith((store / "mlartifacts").as_uri())
    assert list((store / "mlartifacts").rglob("report.md")) and not list(elsewhere.iterdir())
    assert not (tmp_path / "out" / "mlflow.db").exists()


def test_a_missing_tracking_dependency_is_one_line_before_the_run(bench, scifact_slice, flow_specs, tmp_path,
                                                                  monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "alembic" else real(name, *a))
    out = tmp_path / "out"
    status, _, stderr = bench("--dataset", scifact_slice, "--flow", f"title={flow_specs['title']}", "--out", out)
    lines = stderr.strip().splitlines()
    assert status == 2 and len(lines) == 1, stderr
    assert "needs the 'bench' extra (missing: alembic)" in lines[0] and "pip install 'tessera[bench]'" in lines[0]
    assert not (out / "metrics.json").exists() and not (out / "runs").exists()


def test_an_unopenable_store_fails_before_any_flow_runs(bench, scifact_slice, flow_specs, tmp_path):
    out = tmp_path / "out"
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    status, _, stderr = bench("--dataset", scifact_slice, "--flow", f"title={flow_specs['title']}", "--out", out,
                              "--mlflow-uri", f"sqlite:///{blocker}/mlflow.db")
    lines = stderr.strip().splitlines()
    assert status == 2 and len(lines) == 1, stderr
    assert "cannot open the MLflow store" in lines[0] and not (out / "runs").exists()


def test_a_sqlite_store_in_a_folder_that_cannot_be_written_is_refused_at_once(bench, scifact_slice, flow_specs,
                                                                               tmp_path):
    """MLflow retried creating its engine for about 100 s, with a warning each time, before its error (/proc: no
    file can be made there, by root either)."""
    status, _, stderr = bench("--dataset", scifact_slice, "--flow", f"title={flow_specs['title']}", "--out",
                              tmp_path / "out", "--mlflow-uri", "sqlite:////proc/tessera-mlflow.db")
    assert status == 2 and stderr.strip() == ("tessera: error: field '--mlflow-uri': cannot open the MLflow store "
                                              "sqlite:////proc/tessera-mlflow.db: /proc cannot be written here; give "
                                              "another --mlflow-uri, or --no-mlflow"), stderr
    assert not (tmp_path / "out").exists()  # the --out it made for the run is not left behind, empty


def test_a_tracking_server_that_takes_no_connection_is_refused_at_once(tmp_path):
    """MLflow's client retried a refused connection for about 4 minutes before its error."""
    import socket

    from flows.bench.errors import BenchError
    from flows.bench.tracking import open_tracker

    with socket.socket() as free:  # a port nothing listens on once this socket is closed
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(BenchError, match=f"no server answers at 127.0.0.1:{port}") as refused:
        open_tracker(f"http://127.0.0.1:{port}", tmp_path, "tiny")  # said by the probe, not MLflow's retries
    assert refused.value.field == "mlflow-uri"


# -- the UI ---------------------------------------------------------------------------------------------------


def mlflow_ui() -> list[str] | None:
    """The command of an MLflow with its UI: ``$TESSERA_MLFLOW_UI`` (an ``mlflow`` script of a venv with the full
    ``mlflow`` package, as docs/benchmarks.md sets up), or this interpreter's when it has the UI."""
    given = os.environ.get("TESSERA_MLFLOW_UI")
    if given:
        return [given]
    spec = importlib.util.find_spec("mlflow")
    if spec and spec.origin and (Path(spec.origin).parent / "server" / "js" / "build").is_dir():
        return [sys.executable, "-m", "mlflow"]
    return None


def call(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.slow
def test_mlflow_ui_serves_the_logged_runs(bench, scifact_slice, flow_specs, tmp_path, elsewhere):
    command = mlflow_ui()
    if command is None:
        pytest.skip("MLflow's UI is not installed (the full mlflow package: set TESSERA_MLFLOW_UI to its "
                    "mlflow script)")
    out = tmp_path / "out"
    bench_two_flows(bench, scifact_slice, flow_specs, out)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path / "ui.log", "w")
    ui = subprocess.Popen([*command, "ui", "--backend-store-uri", f"sqlite:///{out}/mlflow.db", "--host", "127.0.0.1",
                           "--port", str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline, found = time.monotonic() + 120, None
        while found is None:
            try:
                found = call(f"{base}/api/2.0/mlflow/experiments/get-by-name?experiment_name="
                             f"tessera-bench-{scifact_slice.name}")["experiment"]
            except (urllib.error.URLError, OSError):
                if ui.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"mlflow ui did not answer:\n{(tmp_path / 'ui.log').read_text()[-3000:]}")
                time.sleep(1)
        runs = call(f"{base}/api/2.0/mlflow/runs/search", {"experiment_ids": [found["experiment_id"]]})["runs"]
        assert {r["info"]["run_name"] for r in runs} == {"title", "notitle"}
        with urllib.request.urlopen(f"{base}/get-artifact?path=report.md&run_uuid={runs[0]['info']['run_id']}",
                                    timeout=10) as artifact:  # the UI reads the artifacts beside the store
            assert artifact.read().startswith(b"# Benchmark: ")
        with urllib.request.urlopen(base, timeout=10) as page:
            assert page.status == 200 and b"<html" in page.read().lower()
    finally:
        os.killpg(ui.pid, signal.SIGTERM)  # the group of the process this test started: the UI and its workers
        try:
            ui.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(ui.pid, signal.SIGKILL)
            ui.wait()
        log.close()
