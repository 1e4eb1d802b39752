"""Runs: one search per flow at its own depth, cached by what determines the result.

A run is ``qid, docno, rank, score`` (ranks from 1). Its key hashes the flow spec's
canonical JSON after index injection (an injected index appears by its content key,
not its path), the evaluated queries and the qrels (both order-independent content
hashes) and the largest cutoff. A changed qrels file therefore never reuses a stale
run. Each run is written atomically (temporary file, then rename) as soon as its
flow finishes, to ``<dir>/<flow>-<key16>.parquet``, so an interrupted benchmark
resumes without redoing finished flows. A flow's answers (``flows.bench.answers``) travel in
the same file, as JSON in its schema metadata. Beside it, ``<flow>-<key16>.trec`` is the
same run in TREC format (``flows.trec_run.trec_run``: scores decrease strictly with the rank),
so trec_eval or ir-measures on it reproduce the benchmark's measures.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from flows.bench.errors import BenchError

RUN_COLUMNS = ("qid", "docno", "rank", "score")
FOLDER = "runs"  # the run cache's folder in a benchmark's --out


def run_key(spec_json: dict[str, Any], queries_sha: str, qrels_sha: str, max_k: int) -> str:
    # format 2: a document returned twice keeps its best rank (to_run); a saved run of format 1 may hold it twice
    payload = {"spec": spec_json, "queries": queries_sha, "qrels": qrels_sha, "k": max_k, "format": 2}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class StoredRun:
    flow: str
    key: str
    path: Path
    table: pa.Table
    seconds: float  # time the flow took when it ran
    cached: bool  # read from the cache in this benchmark
    answers: dict[str, str] = field(default_factory=dict)  # qid -> the flow's answer, where it gave one
    #: The share of its steps' cache units read from the step cache when it ran (None: no step was cached), so
    #: ``seconds`` is known for what it was: a run's work, or mostly a read of work done before.
    step_cache_hits: float | None = None
    #: qid -> why a step of it fell back (a reranker that failed kept the first stage's ranking): the run measures
    #: the fallback, and is not reused by a later benchmark (``RunCache.load``), which runs the flow again.
    degraded: dict[str, str] = field(default_factory=dict)
    #: `` (answer not cached)``: the steps that ran without the step cache (``FlowResult.uncached_steps``).
    uncached: str = ""
    #: ``read-only``: why the run stored nothing in the step cache (``FlowResult.nothing_stored``), "" where it could.
    nothing_stored: str = ""

    @property
    def from_step_cache(self) -> str:
        """`` (87% from the step cache)`` beside the run's seconds, naming the steps that ran all the same (the
        share counts only the cached ones), and ``nothing stored (read-only)`` where the step cache could not be
        written; "" when it read nothing from it and could store."""
        said = [f"{self.step_cache_hits:.0%} from the step cache"] if self.step_cache_hits else []
        if said and self.uncached:
            said.append(self.uncached.strip(" ()"))
        if self.nothing_stored:
            said.append(f"nothing stored in the step cache ({self.nothing_stored})")
        return f" ({'; '.join(said)})" if said else ""

    @property
    def trec_path(self) -> Path:
        """The run in TREC format, beside the Parquet file."""
        return self.path.with_suffix(".trec")

    def write_trec(self) -> Path:
        """Write ``trec_path`` (atomically) unless it is there already; returns it."""
        if not self.trec_path.is_file():
            from flows.trec_run import trec_rows
            from operators.atomic import replacing

            rows = trec_rows(self.table, self.flow)
            with replacing(self.trec_path) as tmp, open(tmp, "wb") as f:
                rows.write(f)
        return self.trec_path


class RunCache:
    """Run files under one folder; ``enabled=False`` never reads (but still writes)."""

    def __init__(self, root: Path, *, enabled: bool = True):
        self.root = Path(root)
        self.enabled = enabled

    def path(self, flow: str, key: str) -> Path:
        return self.root / f"{flow}-{key[:16]}.parquet"

    def load(self, flow: str, key: str) -> StoredRun | None:
        path = self.path(flow, key)
        if not self.enabled or not path.is_file():
            return None
        try:
            table = pq.read_table(path)
            meta = {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}
        except (OSError, pa.ArrowInvalid):
            return None  # a damaged file is recomputed
        if meta.get("tessera.bench.key") != key or meta.get("tessera.bench.degraded"):
            return None  # another key's, or a run that measured a step's fallback: run again
        hits = meta.get("tessera.bench.step_cache_hits")
        return StoredRun(flow, key, path, table.replace_schema_metadata(None),
                         float(meta.get("tessera.bench.seconds", 0.0)), cached=True,
                         answers=json.loads(meta.get("tessera.bench.answers", "{}")),
                         step_cache_hits=float(hits) if hits else None,
                         uncached=meta.get("tessera.bench.uncached", ""),
                         nothing_stored=meta.get("tessera.bench.nothing_stored", ""))

    def save(self, flow: str, key: str, table: pa.Table, seconds: float, spec_json: dict[str, Any],
             answers: dict[str, str] | None = None, step_cache_hits: float | None = None,
             degraded: dict[str, str] | None = None, uncached: str = "", nothing_stored: str = "") -> StoredRun:
        path = self.path(flow, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {"tessera.bench.key": key, "tessera.bench.flow": flow, "tessera.bench.seconds": f"{seconds:.6f}",
                "tessera.bench.spec": json.dumps(spec_json, sort_keys=True),
                "tessera.bench.created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        if answers:
            meta["tessera.bench.answers"] = json.dumps(answers, sort_keys=True)
        if step_cache_hits is not None:
            meta["tessera.bench.step_cache_hits"] = f"{step_cache_hits:.6f}"
        if uncached:
            meta["tessera.bench.uncached"] = uncached
        if nothing_stored:
            meta["tessera.bench.nothing_stored"] = nothing_stored
        if degraded:
            meta["tessera.bench.degraded"] = json.dumps(degraded, sort_keys=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            pq.write_table(table.replace_schema_metadata(meta), tmp)
            path.with_suffix(".trec").unlink(missing_ok=True)  # a stale one from an earlier run of the same key
            os.replace(tmp, path)
        except BaseException:  # a full disk, Ctrl-C: no half-written file left to take space
            tmp.unlink(missing_ok=True)
            raise
        stored = StoredRun(flow, key, path, table, seconds, cached=False, answers=dict(answers or {}),
                           step_cache_hits=step_cache_hits, degraded=dict(degraded or {}), uncached=uncached,
                           nothing_stored=nothing_stored)
        stored.write_trec()
        return stored


def to_run(flow: str, result: pa.Table, *, answered: bool = False) -> pa.Table:
    """The ranking of a flow's result table: ``qid, docno, rank, score``, by qid then rank.

    A result without ``rank`` is ranked by ``score`` (descending) within each qid. A flow
    that ``answered`` without retrieving (no ``docno``: answer_only) has an empty run. A document
    a flow returned twice for one query keeps its best rank, and the ranks are renumbered: the
    measures (``ir-measures``, one score per document) would otherwise keep its last, worst one.
    """
    if answered and "docno" not in result.column_names:
        return pa.table({"qid": pa.array([], pa.string()), "docno": pa.array([], pa.string()),
                         "rank": pa.array([], pa.int32()), "score": pa.array([], pa.float64())})
    missing = [c for c in ("qid", "docno") if c not in result.column_names]
    if missing or ("rank" not in result.column_names and "score" not in result.column_names):
        raise BenchError(f"flow '{flow}' returned no ranking: its result has columns {result.column_names}, "
                         "a benchmark needs qid, docno and rank or score", field="flow")
    qid = result.column("qid").cast(pa.string())
    docno = result.column("docno").cast(pa.string())
    score = (result.column("score").cast(pa.float64()) if "score" in result.column_names
             else pa.nulls(result.num_rows, pa.float64()))
    table = pa.table({"qid": qid, "docno": docno, "score": score})
    if "rank" in result.column_names:
        rank = result.column("rank")
        if rank.null_count:
            at = pc.index(pc.is_null(rank), True).as_py()
            raise BenchError(f"flow '{flow}' returned {rank.null_count} row(s) with no rank (the first: query "
                             f"'{qid[at]}', document '{docno[at]}'): a benchmark ranks every row it measures",
                             field="flow")
        order = pc.sort_indices(table.append_column("rank", rank.cast(pa.int32())),
                                [("qid", "ascending"), ("rank", "ascending")])
    else:
        order = pc.sort_indices(table, [("qid", "ascending"), ("score", "descending")])
    return _first_of_each(table.take(order)).select(list(RUN_COLUMNS))


def _first_of_each(table: pa.Table) -> pa.Table:
    """The run (sorted by qid, then the flow's rank or score; the sort is stable) with each (qid, docno) at its
    first place alone, ranked 1, 2, ... within its query. The flow's ranks only order the rows: tied ranks (1, 1, 3)
    would leave the measures to break the tie by docno, while the saved .trec file keeps the flow's order."""
    seen: set[tuple[str, str]] = set()
    first = []
    for pair in zip(table.column("qid").to_pylist(), table.column("docno").to_pylist()):
        first.append(pair not in seen)
        seen.add(pair)
    if not all(first):
        table = table.filter(pa.array(first))
    return table.append_column("rank", pa.array(_ranks_within(table.column("qid")), pa.int32()))


def _ranks_within(qids: pa.ChunkedArray) -> np.ndarray:
    """1, 2, ... within each run of equal qids (the table is sorted by qid)."""
    q = qids.to_numpy(zero_copy_only=False)
    if q.size == 0:
        return np.zeros(0, dtype=np.int32)
    starts = np.r_[True, q[1:] != q[:-1]]
    index = np.arange(q.size)
    return (index - np.maximum.accumulate(np.where(starts, index, 0)) + 1).astype(np.int32)


def depth_shortfall(run: pa.Table, qids: list[str], max_k: int) -> tuple[int, int]:
    """(queries with fewer than ``max_k`` results, the fewest results of any query)."""
    counts = dict.fromkeys(qids, 0)
    if run.num_rows:
        vc = pc.value_counts(run.column("qid"))
        for item in vc.to_pylist():
            if item["values"] in counts:
                counts[item["values"]] = item["counts"]
    short = [c for c in counts.values() if c < max_k]
    return len(short), min(counts.values()) if counts else 0
