"""Helpers over the long Arrow tables every operator reads and writes.

Queries are ``qid, query``; results are one row per (query, document) with
``qid, query, docno, text, score, rank`` and any other columns. Ranks start at 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from operators.errors import MissingColumnsError

if TYPE_CHECKING:
    from operators.base import Operator


def require_columns(table: pa.Table, columns: Iterable[str], *, op: "Operator | None" = None) -> None:
    """Raise an error naming the operator, the missing and the present columns."""
    present = set(table.column_names)
    missing = [c for c in columns if c not in present]
    if missing:
        raise MissingColumnsError(
            f"missing input column(s) {missing}; input has {table.column_names}",
            op=op.name if op else None,
            step=op.step_id if op else None,
        )


def concat(tables: Sequence[pa.Table]) -> pa.Table:
    """Concatenate tables whose columns may differ (missing columns become null)."""
    tables = [t for t in tables if t is not None]
    if not tables:
        return pa.table({})
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="permissive")


def set_column(table: pa.Table, name: str, values) -> pa.Table:
    """Replace or append a column."""
    if not isinstance(values, (pa.Array, pa.ChunkedArray)):
        values = pa.array(values)
    if name in table.column_names:
        return table.set_column(table.column_names.index(name), name, values)
    return table.append_column(name, values)


def qid_groups(table: pa.Table) -> Iterator[tuple[str, pa.Table]]:
    """Yield ``(qid, rows)`` in order of first appearance, rows in input order."""
    grouped, qids, bounds = group_by_qid(table)
    for qid, start, end in zip(qids, bounds[:-1], bounds[1:]):
        yield qid, grouped.slice(start, end - start)


def group_by_qid(table: pa.Table) -> tuple[pa.Table, list[str], np.ndarray]:
    """The table with each query's rows together, its qids, and where each query's rows start.

    Returns ``(grouped, qids, bounds)``: query ``i`` (qids in order of first appearance,
    rows in input order) is rows ``bounds[i]:bounds[i + 1]`` of ``grouped``, so any run of
    consecutive queries is one zero-copy slice. The rows are put in that order with one
    ``take`` (none when they already are): a ``take`` per query would cost the whole table
    each time when its columns have several chunks (Arrow concatenates them per call),
    quadratic in the number of queries.
    """
    if table.num_rows == 0:
        return table, [], np.zeros(1, dtype=np.int64)
    qids = table.column("qid").to_numpy(zero_copy_only=False)
    order = qid_group_order(table, qids)
    rows = np.argsort(order, kind="stable")
    grouped = table if np.array_equal(rows, np.arange(len(rows))) else table.take(pa.array(rows))
    bounds = np.searchsorted(order[rows], np.arange(order.max() + 2))
    return grouped, [str(qids[rows[start]]) for start in bounds[:-1]], bounds


def qid_group_order(table: pa.Table, qids: np.ndarray | None = None) -> np.ndarray:
    """Per row, the number of its qid in order of first appearance (0, 1, ...)."""
    if qids is None:
        qids = table.column("qid").to_numpy(zero_copy_only=False)
    _, first, inverse = np.unique(qids, return_index=True, return_inverse=True)
    group_order = np.empty_like(first)
    group_order[np.argsort(first, kind="stable")] = np.arange(len(first))
    return group_order[inverse]


def _ranking_order(table: pa.Table, groups: np.ndarray, scores: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Row order: by group, then descending score (nulls last), then docno (deterministic ties)."""
    keyed = pa.table({
        "g": pa.array(groups),
        "s": pc.fill_null(scores.cast(pa.float64()), -np.inf),
        "d": table.column("docno") if "docno" in table.column_names else pa.array(np.arange(table.num_rows)),
    })
    return pc.sort_indices(keyed, sort_keys=[("g", "ascending"), ("s", "descending"), ("d", "ascending")])


def sort_by_qid_then_score(table: pa.Table, score_column: str = "score") -> pa.Table:
    """Order rows by first appearance of their qid, then by descending score, then docno.

    Ties in score are broken by docno so rankings are deterministic across executors.
    """
    if table.num_rows == 0:
        return table
    return table.take(_ranking_order(table, qid_group_order(table), table.column(score_column)))


def ranks_within_qid(table: pa.Table) -> pa.Array:
    """1-based position of each row within its qid, in the table's current order."""
    n = table.num_rows
    if n == 0:
        return pa.array([], pa.int32())
    qids = table.column("qid").to_numpy(zero_copy_only=False)
    _, inverse = np.unique(qids, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    grouped = inverse[order]
    is_start = np.r_[True, grouped[1:] != grouped[:-1]]
    group_start = np.maximum.accumulate(np.where(is_start, np.arange(n), 0))
    ranks = np.empty(n, dtype=np.int32)
    ranks[order] = np.arange(n) - group_start + 1
    return pa.array(ranks, pa.int32())


def set_ranking(table: pa.Table, scores, step_id: str, *, groups: np.ndarray | None = None,
                ordered: bool = False) -> pa.Table:
    """Write ``score``/``rank`` and the step's own ``score_<step>``/``rank_<step>``.

    Rows are re-ordered by qid (first appearance) then descending score, then docno,
    so the ``rank`` column and the row order agree. A caller that already knows each
    row's query as a number in first-appearance order (a retriever does) passes it as
    ``groups`` and saves the string grouping of the qid column; one whose rows are
    already in that order (an index's merged hits are) says ``ordered`` and saves the sort.
    """
    scores = scores.cast(pa.float64()) if isinstance(scores, pa.Array) else pa.array(scores, pa.float64())
    if table.num_rows == 0:
        return set_columns(table, ranking_columns(scores, np.zeros(0, np.int64), step_id))
    groups = qid_group_order(table) if groups is None else np.asarray(groups, dtype=np.int64)
    if not ordered:
        order = _ranking_order(table, groups, scores)
        table, scores, groups = table.take(order), scores.take(order), groups[order.to_numpy()]
    return set_columns(table, ranking_columns(scores, groups, step_id))


_RANKS = pa.array(np.arange(1, 10_001, dtype=np.int32))


def ranking_columns(scores: pa.Array, groups: np.ndarray, step_id: str) -> dict[str, pa.Array]:
    """``score``, ``rank``, ``score_<step>`` and ``rank_<step>`` of rows already in ranking order;
    ``groups`` numbers each row's query and does not decrease (ranks restart with each query)."""
    if len(groups) <= len(_RANKS) and (not len(groups) or groups[0] == groups[-1]):
        ranks = _RANKS.slice(0, len(groups))  # one query (the common case of a single call): 1..n
    else:  # several queries: count from each query's first row
        ranks = np.arange(1, len(groups) + 1, dtype=np.int32)
        starts = np.concatenate(([0], np.flatnonzero(groups[1:] != groups[:-1]) + 1))
        ranks = pa.array(ranks - np.repeat(starts, np.diff(starts, append=len(groups))).astype(np.int32))
    return {"score": scores, "rank": ranks, f"score_{step_id}": scores, f"rank_{step_id}": ranks}


def set_columns(table: pa.Table, columns: dict[str, pa.Array | pa.ChunkedArray]) -> pa.Table:
    """Replace (in place) or append several columns, building one new table instead of one per column."""
    names = table.column_names
    added = [n for n in columns if n not in names]
    return pa.Table.from_arrays([columns.get(n, c) for n, c in zip(names, table.columns)]
                                + [columns[n] for n in added], names=names + added)


def empty_like(table: pa.Table) -> pa.Table:
    return table.slice(0, 0)
