"""Helpers over the long Arrow tables every operator reads and writes.

Queries are ``qid, query``; results are one row per (query, document) with
``qid, query, docno, text, score, rank`` and any other columns. Ranks start at 1.
What several operator categories share about these tables lives here once: the
grouping by query, the one ranking helper (``set_ranking``), the checks of input
columns, and the text a document is scored by (``document_text``).
"""

from __future__ import annotations

import functools
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from operators.errors import MissingColumnsError, OperatorError


def require_columns(table: pa.Table, columns: Iterable[str], *, op: str | None = None,
                    step: str | None = None) -> None:
    """Raise an error naming the operator, the missing and the present columns."""
    present = set(table.column_names)
    missing = [c for c in columns if c not in present]
    if missing:
        raise MissingColumnsError(f"missing input column(s) {', '.join(missing)}; input has {shown_columns(table)}",
                                  op=op, step=step)


def shown_columns(table: pa.Table) -> str:
    """A table's columns as an error names them, a plain comma-separated list ("docno, rank, text", not Python's
    ``['docno', 'rank', 'text']``, which a web page or a YAML spec's author does not write), without the executors'
    own (``__tessera_row``); "none" for a table without columns."""
    return ", ".join(c for c in table.column_names if not c.startswith("__tessera")) or "none"


def as_string_array(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One contiguous array; dictionary, string-view and all-null columns become plain strings."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks else pa.array([], column.type)
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_null(column.type) or pa.types.is_string_view(column.type):
        column = column.cast(pa.string())
    return column


def text_column(table: pa.Table, column: str, *, op: str | None = None, step: str | None = None) -> pa.Array:
    """``table[column]`` as one string array; an error naming the step if it is not text."""
    values = as_string_array(table.column(column))
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise OperatorError(
            f"column '{column}' holds {table.schema.field(column).type}, not text; point the step at a string column",
            op=op, step=step,
        )
    return values


def document_text(text: str | None, title: str | None) -> str:
    """The text a document is scored by: the title, a newline, the text (the text alone without a title).

    Rerankers, the ColBERT token store and the training data all build it here, so a model
    scores the very text it was trained on and its tokens were precomputed from."""
    return f"{title}\n{text or ''}" if title else (text or "")


def concat(tables: Sequence[pa.Table]) -> pa.Table:
    """Concatenate tables whose columns may differ (missing columns become null)."""
    tables = [t for t in tables if t is not None]
    if not tables:
        return pa.table({})
    if len(tables) == 1:
        return tables[0]
    return pa.concat_tables(tables, promote_options="permissive")


def select_or_null(table: pa.Table, names: Sequence[str]) -> pa.Table:
    """The columns ``names`` of ``table``, all null where it has no such column."""
    present = set(table.column_names)
    return pa.table({n: table.column(n) if n in present else pa.nulls(table.num_rows) for n in names})


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


def query_rows(table: pa.Table, owned: Iterable[str] = ()) -> pa.Table:
    """One row per query (the first of its group, in order of first appearance), with its query-level columns:
    what a retriever searches for. Left out: the ``owned`` columns it writes itself, and the columns of the
    documents of the results it was given (``document_columns``), which the first row would lend every new hit: a
    dense search after bm25 gave each of its hits bm25's best ``rank_bm25``, which a fusion then read."""
    queries = table
    if table.num_rows > 1:  # one take, not a slice per query
        _, first = np.unique(table.column("qid").to_numpy(zero_copy_only=False), return_index=True)
        if len(first) < table.num_rows:
            queries = table.take(pa.array(np.sort(first)))
    dropped = set(owned) | document_columns(table)
    return queries.drop_columns([c for c in queries.column_names if c in dropped])


def document_columns(table: pa.Table) -> set[str]:
    """The columns of ``table`` (rows of results) that belong to its documents, not to its queries: every step's
    ``score_<step>`` and ``rank_<step>``, and any column whose value differs between the rows of one query."""
    names = [c for c in table.column_names if c not in ("qid", "query")]
    found = {c for c in names if c.startswith(("score_", "rank_"))}
    rest = [c for c in names if c not in found]
    if not rest or table.num_rows < 2:
        return found
    grouped, _, bounds = group_by_qid(table)
    if len(bounds) - 1 == grouped.num_rows:  # a row per query: nothing differs within one
        return found
    firsts = pa.array(np.repeat(bounds[:-1], np.diff(bounds)))
    return found | {c for c in rest if _differs(grouped.column(c), grouped.column(c).take(firsts))}


def _differs(a: pa.ChunkedArray, b: pa.ChunkedArray) -> bool:
    """Whether two columns of one type differ in any row (a null beside a value too)."""
    try:
        same = pc.fill_null(pc.equal(a, b), True)
        return bool(pc.any(pc.or_(pc.invert(same), pc.xor(pc.is_null(a), pc.is_null(b)))).as_py())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):  # lists, structs: as Python values
        return a.to_pylist() != b.to_pylist()


def group_by_qid(table: pa.Table) -> tuple[pa.Table, list[str], np.ndarray]:
    """The table with each query's rows together, its qids, and where each query's rows start.

    Returns ``(grouped, qids, bounds)``: query ``i`` (qids in order of first appearance,
    rows in input order) is rows ``bounds[i]:bounds[i + 1]`` of ``grouped``, so any run of
    consecutive queries is one zero-copy slice. The rows are put in that order with one
    ``take`` (none when they already are): a ``take`` per query would cost the whole table
    each time when its columns have several chunks (Arrow concatenates them per call),
    quadratic in the number of queries; ``grouped`` is one chunk, as a slice walks them all.
    """
    if table.num_rows == 0:
        return table, [], np.zeros(1, dtype=np.int64)
    qids = query_ids(table)
    order = qid_group_order(table, qids)
    rows = np.argsort(order, kind="stable")
    grouped = table if np.array_equal(rows, np.arange(len(rows))) else table.take(pa.array(rows))
    if grouped.num_columns and grouped.column(0).num_chunks > 1:
        # a slice walks every chunk of every column: with a chunk per query (a retriever's output, a cached
        # step's), printing 20,000 queries' tables sat silent for a minute, quadratic in the queries
        grouped = grouped.combine_chunks()
    bounds = np.searchsorted(order[rows], np.arange(order.max() + 2))
    return grouped, [str(qids[rows[start]]) for start in bounds[:-1]], bounds


def qid_group_order(table: pa.Table, qids: np.ndarray | None = None) -> np.ndarray:
    """Per row, the number of its qid in order of first appearance (0, 1, ...)."""
    if qids is None:
        qids = query_ids(table)
    _, first, inverse = np.unique(qids, return_index=True, return_inverse=True)
    group_order = np.empty_like(first)
    group_order[np.argsort(first, kind="stable")] = np.arange(len(first))
    return group_order[inverse]


def query_ids(table: pa.Table) -> np.ndarray:
    """The rows' qids, for work done per query; rows without one (a source's documents fanned in with a retriever's
    results, or read as a step's queries) are refused in words, where numpy failed on them."""
    if "qid" not in table.column_names:
        raise MissingColumnsError(f"rows without a qid reached a step that works per query; input has "
                                  f"{shown_columns(table)} (a source's documents are not queries)", field="qid")
    column = table.column("qid")
    if column.null_count:
        raise MissingColumnsError(f"{column.null_count} of {table.num_rows} rows have no qid (null) and reached a step "
                                  "that works per query (a source's documents fanned in with queries' results?)",
                                  field="qid")
    return column.to_numpy(zero_copy_only=False)


def _ranking_order(table: pa.Table, groups: np.ndarray, scores: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Row order: by group, then descending score (nulls last), then docno (deterministic ties)."""
    keyed = pa.table({
        "g": pa.array(groups),
        "s": pc.fill_null(scores.cast(pa.float64()), -np.inf),
        "d": table.column("docno") if "docno" in table.column_names else pa.array(np.arange(table.num_rows)),
    })
    return pc.sort_indices(keyed, sort_keys=[("g", "ascending"), ("s", "descending"), ("d", "ascending")])


def ranking_columns(step_id: str) -> dict[str, str]:
    """The columns a step that ranks writes through ``set_ranking``, with their roles: ``score``/``rank`` and its own
    ``score_<step>``/``rank_<step>`` copy. Its ``produces`` names them (and the columns of the rows it writes)."""
    return {"score": "score", "rank": "rank", f"score_{step_id}": "score", f"rank_{step_id}": "rank"}


def set_ranking(table: pa.Table | dict[str, pa.Array | pa.ChunkedArray], scores=None, step_id: str | None = None,
                *, rank_by: str | None = None, step_scores: pa.Array | None = None,
                groups: np.ndarray | None = None, ordered: bool = False) -> pa.Table:
    """Put each query's rows best first and number them ``rank`` 1..n: the one ranking helper.

    Rows go by qid (first appearance), then best first, ties by docno, so ``rank`` and
    the row order agree and every executor ranks alike. A step that ranks (retriever,
    reranker, fusion) gives its ``scores`` and ``step_id``: it writes ``score``/``rank``
    and its own ``score_<step>``/``rank_<step>`` copy (``step_scores`` when that copy
    differs from ``score``: a reranker leaves the rows below its top n null). A step
    that dropped rows (postprocess) gives ``rank_by``, an existing rank column (1 =
    best, nulls last): only ``rank`` is renumbered, and an empty table is left as it is.

    A caller that already knows each row's query as a number in first-appearance order
    (a retriever does) passes it as ``groups`` and saves grouping the qid strings; one
    whose rows are already in ranking order (an index's merged hits are) says ``ordered``
    and may pass ``table`` as its columns by name, so the table is built once, not twice
    (a single-query search is short enough for a second build to show).
    """
    if rank_by is not None:
        if table.num_rows == 0:
            return table
        scores = pc.negate(table.column(rank_by).cast(pa.float64())).combine_chunks()
    if isinstance(scores, pa.Array):
        scores = scores if scores.type == pa.float64() else scores.cast(pa.float64())
    else:
        scores = pa.array(scores, pa.float64())
    if isinstance(table, dict):
        if not ordered or groups is None:
            raise ValueError("[Internal] set_ranking takes columns only for rows in ranking order, with groups")
    elif table.num_rows == 0:
        groups = np.zeros(0, np.int64)
    elif groups is None:
        groups = qid_group_order(table)
    groups = np.asarray(groups, dtype=np.int64)
    if not ordered and len(groups):
        order = _ranking_order(table, groups, scores)
        table, scores, groups = table.take(order), scores.take(order), groups[order.to_numpy()]
        step_scores = None if step_scores is None else step_scores.take(order)
    ranks = group_ranks(groups)
    if rank_by is not None:
        ranking = {"rank": ranks}
    else:
        own = scores if step_scores is None else step_scores
        ranking = {"score": scores, "rank": ranks, f"score_{step_id}": own, f"rank_{step_id}": ranks}
    if isinstance(table, dict):
        columns = {**table, **ranking}
        return pa.Table.from_arrays(list(columns.values()), names=list(columns))
    return set_columns(table, ranking)


@functools.cache
def _first_ranks() -> pa.Array:
    """1..10,000, made on first use: ``pa.array`` imports pandas (a quarter of a second), which a command that
    ranks nothing (``tessera --help``, a refused argument) should not pay."""
    return pa.array(np.arange(1, 10_001, dtype=np.int32))


def group_ranks(groups: np.ndarray) -> pa.Array:
    """1..n counted from each query's first row; ``groups`` numbers each row's query and does not decrease."""
    if len(groups) <= 10_000 and (not len(groups) or groups[0] == groups[-1]):
        return _first_ranks().slice(0, len(groups))  # one query (the common case of a single call): 1..n
    ranks = np.arange(1, len(groups) + 1, dtype=np.int32)
    starts = np.concatenate(([0], np.flatnonzero(groups[1:] != groups[:-1]) + 1))
    return pa.array(ranks - np.repeat(starts, np.diff(starts, append=len(groups))).astype(np.int32))


def set_columns(table: pa.Table, columns: dict[str, pa.Array | pa.ChunkedArray]) -> pa.Table:
    """Replace (in place) or append several columns, building one new table instead of one per column."""
    names = table.column_names
    added = [n for n in columns if n not in names]
    return pa.Table.from_arrays([columns.get(n, c) for n, c in zip(names, table.columns)]
                                + [columns[n] for n in added], names=names + added)


def empty_like(table: pa.Table) -> pa.Table:
    return table.slice(0, 0)


def in_rank_order(rows: pa.Table) -> pa.Table:
    """``rows`` sorted by ``rank`` (missing ranks last, ties in their order); unchanged without a ``rank`` column."""
    if "rank" not in rows.column_names:
        return rows
    ranks = rows.column("rank").to_numpy(zero_copy_only=False).astype(float)
    return rows.take(pa.array(np.argsort(np.where(np.isnan(ranks), np.inf, ranks), kind="stable")))
