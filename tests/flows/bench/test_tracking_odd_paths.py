"""A benchmark's default MLflow store (``--out/mlflow.db``, artifacts in ``--out/mlartifacts``) stays in ``--out``
whatever the folder's name: under ``/data/run #1 ?x %20`` the database was written as ``/data/run `` (its URL cut at
the ``?``, ``%20`` read as a space), its lock and artifacts beside ``--out`` (the URL cut at the ``#``), and MLflow
made an empty ``/data/run %231 ...`` folder from the quoted URL's text."""

from __future__ import annotations

import pytest

from flows.bench import tracking


@pytest.mark.parametrize("name", ["run #1 ?x %20 Zoë"])
def test_the_store_and_its_artifacts_stay_in_out(tmp_path, monkeypatch, name):
    from mlflow.tracking import MlflowClient

    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    out = tmp_path / name
    out.mkdir()
    tracker = tracking.open_tracker(None, out, "toy")
    report = out / "report.md"
    report.write_text("# Benchmark: toy\n")
    run = tracker.client.create_run(tracker.experiment_id, run_name="bm25")
    tracker.client.log_artifact(run.info.run_id, str(report))
    assert (out / "mlflow.db").is_file() and (out / "mlartifacts").is_dir()
    assert [p.parent.name for p in (out / "mlartifacts").rglob("report.md")] == ["artifacts"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["cwd", name])  # nothing beside --out
    assert list(cwd.iterdir()) == []
    again = tracking.open_tracker(None, out, "toy")  # the next benchmark into it: the same store and experiment
    assert again.experiment_id == tracker.experiment_id
    [found] = MlflowClient(again.uri).search_runs([again.experiment_id])  # the URL the command prints reads it
    assert found.info.run_name == "bm25"
    assert tracking.store_path(again.uri) == str(out.resolve() / "mlflow.db")
