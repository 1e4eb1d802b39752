"""Query groups across Ray blocks: kept whole as a stage's callable yields its output, and a fused fan-in's put back
in the local executor's order once collected.

Why: Ray slices a yielded table, and collects blocks, wherever row counts say; a qid split across blocks or queries
out of the local order would make a Ray run's output differ from the local executor's.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Largest piece a callable yields (Ray slices a yielded table above half a block,
#: 64 MiB by default, where it could split a qid).
PIECE_BYTES = 16 * 1024 * 1024
#: Column a fused fan-in adds for its rows' order across blocks (``with_branch_order``); never seen by operators.
ORDER_COLUMN = "__tessera_branch"


def with_branch_order(out: pa.Table, branches: list[pa.Table]) -> pa.Table:
    """``out`` with ``ORDER_COLUMN``: per row, the first branch its query has rows in.

    Locally a fan-in's queries come in the order they first appear in its input, the branches'
    outputs one after the other: a query the first branch found nothing for comes after every
    query it found something for, not only those of its own block. Sorting the collected blocks
    stably by this column puts them in that order (``in_local_order``).
    """
    if "qid" not in out.column_names:
        return out
    first = np.full(out.num_rows, len(branches), dtype=np.int8)
    for j in reversed(range(len(branches))):
        if "qid" in branches[j].column_names:
            first[pc.is_in(out.column("qid"), value_set=branches[j].column("qid")).to_numpy(zero_copy_only=False)] = j
    return out.append_column(ORDER_COLUMN, pa.array(first))


def in_local_order(table: pa.Table) -> pa.Table:
    """Collected blocks of a fused fan-in in the local executor's order (stable by ``ORDER_COLUMN``), without it."""
    if ORDER_COLUMN not in table.column_names:
        return table
    first = pc.fill_null(table.column(ORDER_COLUMN), 0).to_numpy()
    if first.size < 2 or bool((first[1:] >= first[:-1]).all()):
        # Already in order (every query found by the first branch, the usual case): no copy of every row.
        return table.drop_columns([ORDER_COLUMN])
    return table.take(np.argsort(first, kind="stable")).drop_columns([ORDER_COLUMN])


def whole_group_pieces(table: pa.Table, max_bytes: int | None = None) -> Iterator[pa.Table]:
    """``table`` in pieces of at most ``max_bytes`` (about) that never split a qid.

    Ray slices a yielded table that is too big for one block wherever the row count
    says, which could split a qid across blocks; pieces this size are never sliced.
    """
    max_bytes = max_bytes or PIECE_BYTES
    n = table.num_rows
    if table.nbytes <= max_bytes or n < 2 or "qid" not in table.column_names:
        yield table
        return
    _, inverse = np.unique(table.column("qid").to_numpy(zero_copy_only=False), return_inverse=True)
    last = np.zeros(inverse.max() + 1, dtype=np.int64)
    np.maximum.at(last, inverse, np.arange(n))
    reach = np.maximum.accumulate(last[inverse])  # the last row of any qid seen so far
    cuts = np.flatnonzero(reach[:-1] == np.arange(n - 1)) + 1  # no qid on both sides
    rows = max(1, int(n * max_bytes / table.nbytes))
    start = 0
    for cut in cuts:
        if cut - start >= rows:
            yield table.slice(start, cut - start)
            start = int(cut)
    yield table.slice(start)
