"""MLflow logging: one run per flow in the experiment ``tessera-bench-<dataset>``.

Params: the flow's spec summary and source, dataset, split, queries, cutoffs, the run
key and whether it came from the cache. Metrics: every measure's mean (``@`` is not
allowed in MLflow names: ``nDCG@10`` is logged as ``nDCG_at_10``). Artifacts: the
report, its plots and ``metrics.json``. The default tracking URI is a file store
under ``<out>/mlruns``; MLflow 3 refuses file stores unless
``MLFLOW_ALLOW_FILE_STORE`` is set, so it is set for file URIs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from flows.bench.errors import BenchError

if TYPE_CHECKING:
    from flows.bench.results import BenchResult


def metric_name(measure: str) -> str:
    return measure.replace("@", "_at_")


def log_benchmark(result: "BenchResult", out: Path, uri: str | None = None) -> str:
    uri = uri or (out.resolve() / "mlruns").as_uri()
    if uri.startswith("file:") or "://" not in uri:
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    try:
        from mlflow.entities import Metric, Param, RunTag
        from mlflow.tracking import MlflowClient
    except ImportError as err:
        raise BenchError(f"MLflow is not installed ({err}); use --no-mlflow", field="mlflow-uri") from None
    import time

    client = MlflowClient(uri)
    name = f"tessera-bench-{result.dataset.name}"
    experiment = client.get_experiment_by_name(name)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(name)
    now = int(time.time() * 1000)
    artifacts = [p for key, p in result.files.items() if key.endswith((".md", ".png")) or key == "metrics.json"]
    for flow, fr in result.flows.items():
        run = client.create_run(experiment_id, run_name=flow, tags={"tessera.bench.flow": flow})
        params = {"flow": flow, "spec": fr.summary[:6000],
                  "source": fr.source, "dataset": str(result.dataset.root), "split": result.dataset.split,
                  "queries": len(result.dataset.qids), "ks": ",".join(map(str, result.ks)),
                  "run_key": fr.key, "cached": fr.run.cached,
                  "baselines": ",".join(result.baselines), "executor": result.options.executor}
        metrics = [Metric(metric_name(m), float(s.mean), now, 0) for m, s in result.summaries[flow].items()]
        metrics.append(Metric("run_seconds", float(fr.run.seconds), now, 0))
        client.log_batch(run.info.run_id, metrics=metrics, params=[Param(k, str(v)) for k, v in params.items()],
                         tags=[RunTag("tessera.bench.key", fr.key)])
        for path in artifacts:
            client.log_artifact(run.info.run_id, str(path))
        client.set_terminated(run.info.run_id)
    return uri

