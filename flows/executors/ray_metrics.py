"""Tessera's Ray metrics: what each step's batches did, and each ingested shard, as Prometheus series.

A cluster user watches a job in the Ray dashboard's metrics (Grafana over Prometheus), not in the
driver's log, so the Ray Data executor's callables and ingestion's write actors record here, on the
worker that did the work: a series then says which node ran it (each node's metrics agent exports
its own workers' series on ``ray start --metrics-export-port``). Ray adds the ``ray_`` prefix, and
Prometheus the ``_total`` of a counter, ``_bucket``/``_sum``/``_count`` of a histogram. The names and
tags are listed in docs/cluster.md#metrics; Serve's request metrics are Ray's own.

Metrics are made once per worker process, on first use. Recording never fails a batch: a metric
that cannot be recorded (no Ray in this process, as with the local executor) is skipped.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

#: Upper bounds (seconds) of the step-batch and shard histograms' buckets.
SECONDS_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0]

STEP_TAGS = ("flow", "step", "op")
INGEST_TAGS = ("index",)

#: name -> (kind, description, tag keys)
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "tessera_step_batches": ("counter", "Batches a flow step ran", STEP_TAGS),
    "tessera_step_rows_in": ("counter", "Rows into a flow step", STEP_TAGS),
    "tessera_step_rows_out": ("counter", "Rows out of a flow step", STEP_TAGS),
    "tessera_step_cache_lookups": ("counter", "Step-cache units a flow step looked up", STEP_TAGS),
    "tessera_step_cache_hits": ("counter", "Step-cache units a flow step found cached", STEP_TAGS),
    "tessera_step_seconds": ("histogram", "Seconds per batch of a flow step", STEP_TAGS),
    "tessera_ingest_chunks_embedded": ("counter", "Chunks an ingestion's embed actors encoded", INGEST_TAGS),
    "tessera_ingest_embed_seconds": ("histogram", "Seconds to embed one shard", INGEST_TAGS),
    "tessera_ingest_shards": ("counter", "Shards an ingestion wrote", INGEST_TAGS),
    "tessera_ingest_docs": ("counter", "Documents in the shards an ingestion wrote", INGEST_TAGS),
    "tessera_ingest_chunks": ("counter", "Chunks an ingestion wrote", INGEST_TAGS),
    "tessera_ingest_failures": ("counter", "Documents an ingestion could not index (its ledger)", INGEST_TAGS),
    "tessera_ingest_shard_seconds": ("histogram", "Seconds to write one shard", INGEST_TAGS),
}

_made: dict[str, Any] = {}
_lock = threading.Lock()


def _metric(name: str) -> Any:
    with _lock:
        if name not in _made:
            from ray.util import metrics

            kind, description, tags = METRICS[name]
            if kind == "histogram":
                _made[name] = metrics.Histogram(name, description, boundaries=SECONDS_BUCKETS, tag_keys=tags)
            else:
                _made[name] = metrics.Counter(name, description, tag_keys=tags)
        return _made[name]


def _record(values: dict[str, float], tags: dict[str, str]) -> None:
    with contextlib.suppress(Exception):  # metrics are for watching; a batch never fails on them
        for name, value in values.items():
            metric = _metric(name)
            if METRICS[name][0] == "histogram":
                metric.observe(value, tags=tags)
            elif value:
                metric.inc(value, tags=tags)


def record_batch(flow: str, step: str, op: str, stats: Any) -> None:
    """One batch of a step (a ``flows.runner.BatchStats``)."""
    _record({"tessera_step_batches": 1, "tessera_step_rows_in": stats.rows_in, "tessera_step_rows_out": stats.rows_out,
             "tessera_step_cache_lookups": stats.units, "tessera_step_cache_hits": stats.hits,
             "tessera_step_seconds": stats.seconds}, {"flow": flow, "step": step, "op": op})


def record_shard(index: str, result: Any) -> None:
    """One shard an ingestion wrote (a ``flows.ingestion.shards.ShardResult``); ``index`` is its folder name."""
    _record({"tessera_ingest_shards": 1, "tessera_ingest_docs": result.docs, "tessera_ingest_chunks": result.chunks,
             "tessera_ingest_failures": len(result.failures), "tessera_ingest_shard_seconds": result.seconds},
            {"index": index})


def record_embedded(index: str, chunks: int, seconds: float) -> None:
    """One shard an ingestion's embed actor encoded."""
    _record({"tessera_ingest_chunks_embedded": chunks, "tessera_ingest_embed_seconds": seconds}, {"index": index})
