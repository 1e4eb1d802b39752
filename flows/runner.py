"""Run one operator on one batch, through the step cache: shared by every executor.

The local executor calls ``StepRunner.run`` in-process; the Ray executor wraps the
same runner in the callable class it hands to ``map_batches``. So caching, metadata
and statistics behave the same wherever a step runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flows.cache import StepCache
from flows.cache_calls import BatchCalls
from flows.cache_keys import row_unit_keys, step_key, table_unit_key
from operators.base import Operator
from operators.call_memo import remembering
from operators.errors import OperatorError
from operators.step_notes import joined_degraded
from operators.tables import concat, qid_groups

ROW_INDEX = "__tessera_row"


def caches(op: Operator | type[Operator]) -> bool:
    """Whether a step of ``op`` (an operator, or its class) has its output kept in the step cache: a cacheable
    operator that is not a source. A source reads its files afresh on every run (a cache would not see them
    change), so the runner never caches one. What ``tessera ops`` and ``tessera cache explain`` report."""
    return bool(op.cacheable) and op.scope != "source"


#: What a batch counts, summed over a step's batches (``BatchStats.add_counts_to``).
COUNTS = ("units", "hits", "rows_in", "rows_out", "seconds")


@dataclass
class BatchStats:
    """What one batch did: units looked up and hit, rows in and out, seconds."""

    units: int = 0
    hits: int = 0
    rows_in: int = 0
    rows_out: int = 0
    seconds: float = 0.0
    metadata: dict[str, dict[str, Any]] = field(default_factory=dict)
    usage: dict[str, float] = field(default_factory=dict)  # what the operator spent (LLM calls, tokens)
    #: Warnings a Ray worker kept from its own log, for the driver to say (ray_warnings): (logger, level, message,
    #: the function that logged it).
    warnings: list[tuple[str, int, str, str]] = field(default_factory=list)
    #: The queries whose rows the batch held, kept for a step that says what a query with none gets
    #: (``Operator.no_rows_metadata``): the driver learns which queries reached it, wherever the batches ran.
    qids: set[str] = field(default_factory=set)

    def add(self, other: "BatchStats") -> None:
        other.add_counts_to(self)
        merge_metadata(self.metadata, other.metadata)
        self.warnings += other.warnings
        self.qids |= other.qids

    def add_counts_to(self, total: Any) -> None:
        """Add this batch's ``COUNTS`` and usage to ``total``: another batch's (``add``) or its step's ``StepRecord``
        (``RunState.add_batch``), one sum for both."""
        for name in COUNTS:
            setattr(total, name, getattr(total, name) + getattr(self, name))
        add_usage(total.usage, self.usage)

    def to_dict(self) -> dict[str, Any]:
        return {"units": self.units, "hits": self.hits, "rows_in": self.rows_in,
                "rows_out": self.rows_out, "seconds": round(self.seconds, 6)}


def merge_metadata(into: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]]) -> None:
    """Add ``new`` per-query metadata; a dict value joins the dict already under its key (``usage`` keyed by
    step collects every step's entry), any other value replaces it; a second ``degraded`` mark joins the first."""
    for qid, values in new.items():
        mine = into.setdefault(qid, {})
        for key, value in values.items():
            old = mine.get(key)
            if key == "degraded" and isinstance(old, dict) and isinstance(value, dict):
                mine[key] = joined_degraded(old, value)
            else:
                mine[key] = {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value


def add_usage(into: dict[str, float], new: dict[str, float]) -> None:
    for name, value in new.items():
        into[name] = into.get(name, 0) + value


def placed_operator(op: Operator, placement: Any | None) -> Operator:
    """``op``, or when its step has a ``placement``, a proxy whose model runs on that Serve deployment.

    Ray Serve is imported only for placed steps (``flows.placement``).
    """
    if placement is None:
        return op
    from flows.placement import place

    return place(op, deployment=placement.deployment, app=placement.app)


class _RowSlices:
    """Each input row's output rows as a slice (start, count) of one of several tables, the fresh output of the
    cache's misses or a hit's stored file, gathered back in input-row order."""

    def __init__(self, n: int):
        self.sources: list[pa.Table] = []
        self._ids: dict[int, int] = {}
        self.source = np.full(n, -1, dtype=np.int64)
        self.starts = np.zeros(n, dtype=np.int64)
        self.counts = np.zeros(n, dtype=np.int64)

    def add(self, rows: Any, source: pa.Table, starts: Any, counts: Any) -> None:
        sid = self._ids.setdefault(id(source), len(self.sources))
        if sid == len(self.sources):
            self.sources.append(source)
        self.source[rows], self.starts[rows], self.counts[rows] = sid, starts, counts

    def input_rows(self) -> np.ndarray:
        """For each gathered row, the input row it belongs to."""
        return np.repeat(np.arange(len(self.counts)), self.counts)

    def gather(self) -> pa.Table | None:
        """The slices' rows in input-row order; None when no input row has any."""
        counts = self.counts
        offsets = np.repeat(self.starts - np.r_[0, np.cumsum(counts)[:-1]], counts) + np.arange(counts.sum())
        out_source = np.repeat(self.source, counts)
        gathered, positions = [], []
        for sid, source in enumerate(self.sources):
            where = np.flatnonzero(out_source == sid)
            if len(where):
                gathered.append(source.take(pa.array(offsets[where])))
                positions.append(where)
        if not gathered:
            return None
        return concat(gathered).take(pa.array(np.argsort(np.concatenate(positions), kind="stable")))


class StepRunner:
    """Runs ``op`` on batches, serving units from ``cache`` when it has them."""

    def __init__(self, op: Operator, cache: StepCache | None = None):
        self.op = op
        self.cache = cache if (cache is not None and caches(op)) else None
        self.key = step_key(op) if self.cache else None
        self.tracks_queries = op.scope != "source" and bool(op.no_rows_metadata())

    def run(self, table: pa.Table) -> tuple[pa.Table, BatchStats]:
        """The step's output for ``table`` and what the batch did. What the operator records goes to notes of
        this call (``Operator.recording``), so runs sharing the operator on other threads keep their own. With the
        cache, each model call the batch finishes is recorded as it finishes (``flows.cache_calls``): a batch
        that does not end (a Ctrl-C) leaves them for the rerun; one that ends drops them for its units."""
        start = time.perf_counter()
        calls = BatchCalls(self.cache, self.key) if self.cache is not None and self.key else None
        with self.op.recording() as notes, remembering(calls):
            if self.cache is None or self.op.scope == "source":
                out, meta = self._call(table)
                stats = BatchStats(rows_in=table.num_rows, rows_out=out.num_rows, metadata=meta)
            elif self.op.scope == "row":
                out, stats = self._run_rows(table)
            elif self.op.scope == "query":
                groups = [g for _, g in qid_groups(table)] if table.num_rows else []
                out, stats = self._run_units(table, groups)
            else:
                out, stats = self._run_units(table, [table])
        if calls is not None:
            calls.forget()
        stats.seconds = time.perf_counter() - start
        stats.usage = notes.drain_usage()
        if self.tracks_queries and table.num_rows and "qid" in table.column_names:
            stats.qids = {str(q) for q in pc.unique(table.column("qid")).drop_null().to_pylist()}
        return out, stats

    def _call(self, table: pa.Table) -> tuple[pa.Table, dict[str, dict[str, Any]]]:
        out = self.op(table)
        return out, self.op.drain_metadata()  # (this call's notes: ``run`` holds them)

    # -- row scope: a unit per row, only written columns stored -------------------

    def _run_rows(self, table: pa.Table) -> tuple[pa.Table, BatchStats]:
        n = table.num_rows
        stats = BatchStats(units=n, rows_in=n)
        if n == 0:
            out, _ = self._call(table)
            return out, stats
        reads = self.op.reads()
        columns = table.column_names if reads is None else [c for c in reads if c in table.column_names]
        keys = row_unit_keys(table, columns, self.key)
        cached = self.cache.get(keys)
        miss = np.array([i for i, k in enumerate(keys) if k not in cached], dtype=np.int64)
        stats.hits = n - len(miss)
        if len(miss) == n:  # nothing cached: the operator's own output is the answer
            out, meta = self._call_rows(table, miss)
            self._store_rows(keys, miss, table, out, meta)
            merge_metadata(stats.metadata, meta)
            out = out.drop_columns([ROW_INDEX])
            stats.rows_out = out.num_rows
            return out, stats
        slices = _RowSlices(n)
        fresh: dict[str, dict[str, Any]] = {}
        if len(miss):
            out, fresh = self._call_rows(table.take(pa.array(miss)), miss)
            lo, hi, written = self._store_rows(keys, miss, table, out, fresh)
            slices.add(miss, written, lo, hi - lo)
        for i, k in enumerate(keys):
            unit = cached.get(k)
            if unit is None:
                continue
            if unit.meta:  # the query metadata the row's call left (usage), as a query unit's hit brings back
                merge_metadata(stats.metadata, unit.meta)
            if unit.source is not None:
                slices.add(i, unit.source, unit.start, unit.count)
        merge_metadata(stats.metadata, fresh)  # this run's calls over what the cache remembered
        written = slices.gather()
        if written is None:
            out = self._call(table.slice(0, 0))[0]
            stats.rows_out = 0
            return out, stats
        passthrough = [c for c in table.column_names if c not in written.column_names]
        out = written
        if passthrough:  # (a table of no columns has no rows to append to)
            out = table.select(passthrough).take(pa.array(slices.input_rows()))
            for name in written.column_names:
                out = out.append_column(name, written.column(name))
            # the input's order, new columns last, as a step keeps it: a run with some hits was otherwise ordered
            # unlike one with none (title before docno in its --out file)
            out = out.select([c for c in table.column_names if c in out.column_names]
                             + [c for c in written.column_names if c not in table.column_names])
        if _replayed_a_taken_qid(table, out):  # a cached row's added query (q1#1) is now a query of the input
            out, meta = self._call(table)  # computed afresh, as --no-cache would: it numbers past the input's qids
            stats.hits, stats.metadata = 0, {}
            merge_metadata(stats.metadata, meta)
        stats.rows_out = out.num_rows
        return out, stats

    def _call_rows(self, rows: pa.Table, numbers: np.ndarray) -> tuple[pa.Table, dict[str, dict[str, Any]]]:
        """The operator on ``rows`` (the input's rows ``numbers``), its output carrying each input row's number in
        ``ROW_INDEX``, so each output row can be stored under its input row's key; an output out of its input's
        order is refused (``docs/operators.md``: a row step keeps its input's order)."""
        out, meta = self._call(rows.append_column(ROW_INDEX, pa.array(numbers)))
        if ROW_INDEX in out.column_names and (order := out.column(ROW_INDEX).to_numpy()).size > 1 \
                and (np.diff(order) < 0).any():
            raise OperatorError(  # the cache's rows follow their input's: its hits would give another order
                "a row step keeps its input's order (the rows of input row 1, then of row 2, ...), and it reordered "
                "its rows: leave the order to a query-scope step (a reranker), or run with --no-cache",
                op=self.op.name, step=self.op.step_id)
        return out, meta

    def _store_rows(self, keys: list[bytes], rows: np.ndarray, table: pa.Table, out: pa.Table,
                    meta: dict[str, dict[str, Any]]):
        """Cache the written columns of each input row's output, with its query's metadata from this call
        (a row of a query marked ``degraded`` is not stored: a failure is not replayed).

        Returns each row's slice bounds in ``out`` and the written columns.
        """
        out_rows = out.column(ROW_INDEX).to_numpy()
        lo = np.searchsorted(out_rows, rows, side="left")
        hi = np.searchsorted(out_rows, rows, side="right")
        stored = out.select(self._written_columns(table, out))
        qids = table.column("qid").to_pylist() if meta and "qid" in table.column_names else None
        seen: set[bytes] = set()
        units = []
        for i, a, b in zip(rows, lo, hi):
            qid = None if qids is None else str(qids[i])
            unit_meta = {qid: meta[qid]} if qid in meta else None
            if keys[i] not in seen and not (unit_meta and "degraded" in unit_meta[qid]):
                seen.add(keys[i])
                units.append((keys[i], stored.slice(a, b - a) if b > a else None, unit_meta))
        self.cache.put(units)
        return lo, hi, stored

    def _written_columns(self, table: pa.Table, out: pa.Table) -> list[str]:
        """The columns a row's cache entry keeps: those ``produces()`` declares and new ones. A hit takes every
        other column from its input row, so an input column the step changed without declaring it is refused
        here, naming it: the cache would give it back as it went in (the contract test checks it too)."""
        declared = set(self.op.produces())
        rows = out.column(ROW_INDEX)
        changed = [c for c in out.column_names if c != ROW_INDEX and c not in declared and c in table.column_names
                   and not _same_values(table.column(c).take(rows), out.column(c))]
        if changed:
            raise OperatorError(
                f"it changed column(s) {', '.join(map(repr, changed))} of its input without declaring them in "
                "produces(), and its cache keeps only the columns declared there; declare them (or run with "
                "--no-cache)", op=self.op.name, step=self.op.step_id)
        return [c for c in out.column_names if c != ROW_INDEX and (c in declared or c not in table.column_names)]

    # -- query and corpus scope: a unit per group, whole output stored -------------

    def _run_units(self, table: pa.Table, groups: list[pa.Table]) -> tuple[pa.Table, BatchStats]:
        stats = BatchStats(units=len(groups), rows_in=table.num_rows)
        if not groups:
            out, _ = self._call(table)
            return out, stats
        keys = [table_unit_key(g, self.key) for g in groups]
        cached = self.cache.get(keys)
        misses = [i for i, k in enumerate(keys) if k not in cached]
        stats.hits = len(groups) - len(misses)
        results: dict[int, pa.Table | None] = {}
        empty = None  # an output of no rows keeps the columns and types the step gave them
        if misses:
            batch = concat([groups[i] for i in misses])
            out, meta = self._call(batch)
            empty = out.slice(0, 0)
            merge_metadata(stats.metadata, meta)
            if len(misses) == 1:
                per_group = {0: out}
            else:
                per_group = dict(enumerate(_split_by_qid(out, [groups[i] for i in misses])))
            to_store = []
            for j, i in enumerate(misses):
                piece = per_group.get(j)
                results[i] = piece
                qids = _qids(groups[i])
                unit_meta = {q: stats.metadata[q] for q in qids if q in stats.metadata} or None
                if not any("degraded" in meta for meta in (unit_meta or {}).values()):
                    to_store.append((keys[i], piece, unit_meta))  # a failure (a timeout) is not replayed
            self.cache.put(to_store)
        for i, k in enumerate(keys):
            if i not in results:
                results[i] = cached[k].table
                if cached[k].meta:
                    merge_metadata(stats.metadata, cached[k].meta)
        parts = [results[i] for i in range(len(groups)) if results[i] is not None and results[i].num_rows]
        out = concat(parts) if parts else empty if empty is not None else self._call(table.slice(0, 0))[0]
        stats.rows_out = out.num_rows
        return out, stats


def _same_values(before: pa.ChunkedArray, after: pa.ChunkedArray) -> bool:
    """Whether a column came out with the values it went in with (a cast to another type of the same values, as
    after each call ``large_string`` becomes ``string``, is no change)."""
    if before.type != after.type:
        try:
            before = before.cast(after.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return False
    return before.equals(after)


def _replayed_a_taken_qid(table: pa.Table, out: pa.Table) -> bool:
    """Whether a row step's output holds a qid twice where its input held each once: the rows a cached unit added
    (``query.expand``'s ``1#1``) under a qid that this input gives another query (a queries file of ``1`` and
    ``1#1``), which the operator, run on the whole batch, numbers past."""
    if "qid" not in table.column_names or "qid" not in out.column_names or out.num_rows <= table.num_rows:
        return False
    return pc.count_distinct(table.column("qid")).as_py() == table.num_rows \
        and pc.count_distinct(out.column("qid")).as_py() < out.num_rows


def _qids(table: pa.Table) -> list[str]:
    if "qid" not in table.column_names:
        return []
    return list(dict.fromkeys(str(q) for q in table.column("qid").to_pylist()))


def _split_by_qid(out: pa.Table, groups: list[pa.Table]) -> list[pa.Table | None]:
    """Split a query-scope output back into its input groups by qid."""
    by_qid = {qid: rows for qid, rows in qid_groups(out)} if out.num_rows else {}
    return [by_qid.get(_qids(g)[0]) if _qids(g) else None for g in groups]
