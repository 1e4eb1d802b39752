"""``flows.bench`` in a Ray job with a ``--mlflow-uri`` of its own: a relative store (``sqlite:///mlflow.db``) would be
written into the job's temporary working directory, which Ray deletes with the session, as docs/cluster.md says; it
was taken, the benchmark ran, and its MLflow runs were lost. Now it is refused before anything runs, in one line, as
a relative ``--out`` is. Run as Ray's job supervisor starts an entrypoint (its job-config variable set), in this
process."""

from __future__ import annotations

import pytest


@pytest.fixture
def bench_in_job(bench, monkeypatch, tmp_path):
    """``bench(*args)`` as a job's entrypoint, from a working directory of its own (the job's uploaded copy)."""
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", '{"runtime_env": {"working_dir": "gcs://_ray_pkg_0.zip"}}')
    monkeypatch.chdir(tmp_path)
    return bench


@pytest.mark.parametrize("uri, store", [
    ("sqlite:///mlflow.db", "mlflow.db"),
    ("sqlite:///stores/mlflow.db", "stores/mlflow.db"),
    ("file:mlruns", "mlruns"),
    ("mlruns", "mlruns"),
])
def test_a_relative_store_is_refused_in_a_job(bench_in_job, tmp_path, uri, store):
    status, _, err = bench_in_job("--dataset", tmp_path / "nowhere", "--flow", "bm25", "--out", tmp_path / "out",
                                  "--mlflow-uri", uri)
    assert status == 2 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"tessera: error: field '--mlflow-uri': --mlflow-uri '{uri}' names a relative path "
                          f"({store}): in a Ray job the store would be written into the job's temporary working "
                          "directory and lost;"), err
    assert "sqlite:////abs/path/mlflow.db" in err, err
    assert not any(tmp_path.iterdir()), "nothing is written before the refusal"


@pytest.mark.parametrize("uri", ["sqlite:///{abs}/mlflow.db", "file://{abs}/mlruns", "http://127.0.0.1:9/"])
def test_an_absolute_store_or_a_server_goes_on_to_the_next_check(bench_in_job, tmp_path, uri):
    status, _, err = bench_in_job("--dataset", tmp_path / "nowhere", "--flow", "bm25", "--out", tmp_path / "out",
                                  "--mlflow-uri", uri.format(abs=tmp_path))
    assert status == 2 and "--mlflow-uri" not in err and "dataset folder" in err, err


def test_outside_a_job_a_relative_store_is_the_working_directory_s(bench, monkeypatch, tmp_path):
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    monkeypatch.chdir(tmp_path)
    status, _, err = bench("--dataset", tmp_path / "nowhere", "--flow", "bm25", "--out", tmp_path / "out",
                           "--mlflow-uri", "sqlite:///mlflow.db")
    assert status == 2 and "--mlflow-uri" not in err and "dataset folder" in err, err
