"""The machine-readable outputs of a benchmark, each written atomically.

* ``metrics.json``: ``{flow: {measure: mean}}``
* ``metrics.csv``: ``flow, measure, mean, ci_low, ci_high, n`` (95% interval, ``metrics.summarize_all``)
* ``per_query.parquet``: ``flow, qid, query, measure, value`` (``query``: the query's text)
* ``significance.csv``: ``baseline, flow, measure, baseline_mean, flow_mean, delta, delta_low, delta_high, p,
  p_corrected, wins, losses, ties, n, test, correction``
* ``bench.json``: the options, the dataset, and per flow its run file (and TREC run file), key, whether
  the run came from the cache, seconds, index, and warnings
"""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from flows.bench import metrics
from operators.atomic import write_text

if TYPE_CHECKING:
    from flows.bench.results import BenchResult


def _csv(header: list[str], rows: list[list[Any]]) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buf.getvalue()


def write_all(result: "BenchResult", out: Path) -> dict[str, Path]:
    files = {}
    files["metrics.json"] = write_text(out / "metrics.json", json.dumps(result.metrics_dict(), indent=2))
    rows = [[f, m, s.mean, s.ci_low, s.ci_high, s.n] for f, by_m in result.summaries.items() for m, s in by_m.items()]
    files["metrics.csv"] = write_text(out / "metrics.csv", _csv(
        ["flow", "measure", "mean", "ci_low", "ci_high", "n"], rows))
    queries = result.dataset.queries
    texts = dict(zip(queries.column("qid").to_pylist(), queries.column("query").to_pylist()))
    tables = [metrics.per_query_table(f, values, texts) for f, values in result.per_query.items()]
    path = out / "per_query.parquet"
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    pq.write_table(pa.concat_tables(tables), tmp)
    os.replace(tmp, path)
    files["per_query.parquet"] = path
    header = ["baseline", "flow", "measure", "baseline_mean", "flow_mean", "delta", "delta_low", "delta_high", "p",
              "p_corrected",
              "wins", "losses", "ties", "n", "test", "correction"]
    sig = [[*(c.to_dict()[h] for h in header[:-2]), result.options.test, result.options.correction]
           for c in result.comparisons]
    files["significance.csv"] = write_text(out / "significance.csv", _csv(header, sig))
    files["bench.json"] = write_text(out / "bench.json", json.dumps(_summary(result), indent=2, default=str))
    return files


def code_version() -> dict[str, Any]:
    """The Tessera that made the figures: its package version and, from a git checkout, the commit (with
    ``dirty`` when files differ from it), so a figure can be traced to its code."""
    import subprocess
    from importlib import metadata

    try:
        version = metadata.version("tessera")
    except metadata.PackageNotFoundError:
        version = None
    root = Path(__file__).resolve().parents[2]
    commit = dirty = None
    if (root / ".git").exists():
        try:
            # One call gives both: the "# branch.oid" header is the commit, any other line a changed file.
            lines = subprocess.run(["git", "-C", str(root), "status", "--porcelain=v2", "--branch",
                                    "--untracked-files=no"], capture_output=True, text=True, timeout=10,
                                   check=True).stdout.splitlines()
        except (OSError, subprocess.SubprocessError):
            lines = []
        oid = next((line.split()[2] for line in lines if line.startswith("# branch.oid ")), None)
        if oid and oid != "(initial)":  # "(initial)": a repository with no commit yet
            commit, dirty = oid, any(not line.startswith("#") for line in lines)
    return {"version": version, "commit": commit, "dirty": dirty}


def _summary(result: "BenchResult") -> dict[str, Any]:
    d = result.dataset
    o = result.options
    return {
        "tessera": code_version(),
        "dataset": {"path": str(d.root), "split": d.split, "queries": len(d.qids), "unjudged": d.unjudged,
                    "judgements": d.qrels.num_rows,
                    "queries_sha256": d.queries_fingerprint(), "qrels_sha256": d.qrels_fingerprint()},
        "options": {"ks": result.ks, "baselines": result.baselines, "test": o.test, "correction": o.correction,
                    "executor": o.executor, "limit": o.limit, "cache": o.cache,
                    "min_relevance": o.min_relevance},
        "flows": {name: {"source": fr.source, "key": fr.key, "run_file": o.shown(fr.run.path),
                         "trec_file": o.shown(fr.run.trec_path), "cached": fr.run.cached,
                         "seconds": round(fr.run.seconds, 3), "results": fr.run.table.num_rows,
                         "step_cache_hits": None if fr.run.step_cache_hits is None
                         else round(fr.run.step_cache_hits, 4),
                         "step_cache_nothing_stored": fr.run.nothing_stored or None,
                         "queries_short_of_max_k": fr.short_queries, "degraded_queries": len(fr.run.degraded),
                         "index": None if fr.index is None else {"path": str(fr.index.path), "key": fr.index.key,
                                                                 "dense": fr.index.dense, "built": fr.index_built},
                         "spec": fr.spec}
                  for name, fr in result.flows.items()},
        "warnings": result.warnings,
        "seconds": round(result.seconds, 3),
    }
