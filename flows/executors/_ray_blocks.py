"""Ray tasks over materialised blocks: the reshaping the Ray Data executor does between stages.

Each function takes and returns Arrow tables (or ``ObjectRef``s of them) and runs as a
plain Ray task, not a Ray Data stage: regrouping a dataset by qid (a shuffle in the
local executor's order and batches), concatenating blocks for a corpus step, conforming
a fan-in's blocks to one schema, slicing, cutting a block into even pieces for a model
step's actors, reading a schema, and computing a step's output for an empty input.
``ray_data`` says when each one is used.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray

from flows.executors.base import query_batch_ends
from flows.runner import StepRunner
from operators.base import Operator
from operators.tables import concat

#: Column a regroup adds while it moves rows; never seen by operators.
GROUP_COLUMN = "__tessera_group"
#: How many partitions (output blocks) a regroup makes at most (each is one call on the actor pool).
MAX_PARTITIONS = 64


def regroup(blocks: list[Any], rows: list[int], qid_type: pa.DataType, batch_size: int | None,
            ) -> tuple[list[Any], list[int]]:
    """Blocks where every qid's rows lie in one block, in the local executor's order and batches
    (the steps are in ``ray_data``'s docstring); returns the new blocks and their rows."""
    counts = ray.get([_qid_counts.remote(ref) for ref in blocks])
    sizes: dict[Any, int] = {}
    for _, qids, n in counts:
        for qid, k in zip(qids, n):
            sizes[qid] = sizes.get(qid, 0) + k
    cuts = partition_cuts(list(sizes.values()), batch_size)
    order = ray.put(pa.array(list(sizes), type=qid_type))
    parts = len(cuts) + 1
    pieces = [_split_by_partition.options(num_returns=parts).remote(ref, order, cuts)
              for ref, n in zip(blocks, rows) if n]
    if parts == 1:
        pieces = [[p] for p in pieces]
    merged = [_merge_partition.remote(*[p[i] for p in pieces]) for i in range(parts)]
    ends = np.cumsum(list(sizes.values()))[[*(c - 1 for c in cuts), len(sizes) - 1]]
    return merged, np.diff(ends, prepend=0).tolist()


def partition_cuts(group_rows: list[int], batch_size: int | None, max_partitions: int = MAX_PARTITIONS,
                   ) -> list[int]:
    """Group ranks where a new partition starts: the local executor's batch boundaries, thinned
    to at most ``max_partitions`` partitions (a partition is then a run of whole batches)."""
    cuts = query_batch_ends(group_rows, batch_size)[:-1]
    if len(cuts) + 1 > max_partitions:
        step = (len(cuts) + 1) / max_partitions
        cuts = [cuts[int(i * step) - 1] for i in range(1, max_partitions)]
    return cuts


@ray.remote
def _qid_counts(block: pa.Table) -> tuple[int, list[Any], list[int]]:
    """Rows, distinct qids in order of first appearance and their row counts."""
    if block.num_rows == 0:
        return 0, [], []
    qids = block.column("qid").to_numpy(zero_copy_only=False)
    values, first, counts = np.unique(qids, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    return block.num_rows, values[order].tolist(), counts[order].tolist()


@ray.remote
def _split_by_partition(block: pa.Table, order: pa.Array, cuts: list[int]) -> tuple[pa.Table, ...] | pa.Table:
    """Rows of each partition (qid ranks below ``cuts[0]``, then ``cuts[1]``...), in block order."""
    ranks = pc.index_in(block.column("qid"), value_set=order).cast(pa.int64())
    block = block.append_column(GROUP_COLUMN, ranks)
    part = np.searchsorted(np.asarray(cuts), ranks.to_numpy(zero_copy_only=False), side="right")
    pieces = tuple(block.filter(pa.array(part == p)) for p in range(len(cuts) + 1))
    return pieces if len(pieces) > 1 else pieces[0]


@ray.remote
def _merge_partition(*pieces: pa.Table) -> pa.Table:
    """One partition: the pieces in block order, stably sorted by qid rank."""
    table = _concat_non_empty(pieces)
    order = np.argsort(table.column(GROUP_COLUMN).to_numpy(), kind="stable")
    return table.take(pa.array(order)).drop_columns([GROUP_COLUMN])


@ray.remote
def concat_blocks(*blocks: pa.Table) -> pa.Table:
    return _concat_non_empty(blocks)


def _concat_non_empty(tables: tuple[pa.Table, ...]) -> pa.Table:
    """The tables with rows, concatenated; the first table when none has any (it keeps the schema)."""
    return concat([t for t in tables if t.num_rows] or list(tables[:1]))


@ray.remote
def conform_block(block: pa.Table, schema: pa.Schema) -> pa.Table:
    return conform(block, schema)


@ray.remote
def even_bounds_of(block: pa.Table, pieces: int, whole_qids: bool) -> list[int]:
    return even_bounds(block, pieces, whole_qids)


def even_bounds(table: pa.Table, pieces: int, whole_qids: bool) -> list[int]:
    """Row bounds that cut ``table`` into about ``pieces`` pieces of like size; with ``whole_qids``, only where no
    qid has rows on both sides (the next such place after an even cut), so a qid's rows stay in one piece."""
    n = table.num_rows
    cuts = [round(i * n / pieces) for i in range(1, pieces)]
    if whole_qids and "qid" in table.column_names and n > 1:
        codes = pc.dictionary_encode(table.column("qid")).combine_chunks().indices
        codes = pc.fill_null(codes, -1).to_numpy(zero_copy_only=False) + 1  # a null qid is a group of its own
        last = np.zeros(int(codes.max()) + 1, dtype=np.int64)
        np.maximum.at(last, codes, np.arange(n))
        reach = np.maximum.accumulate(last[codes])  # the last row of any qid seen so far
        allowed = np.flatnonzero(reach[:-1] == np.arange(n - 1)) + 1  # no qid on both sides
        cuts = [int(allowed[i]) for i in np.searchsorted(allowed, cuts) if i < len(allowed)]
    return sorted({0, n, *cuts})


@ray.remote
def slice_block(block: pa.Table, start: int, stop: int) -> pa.Table:
    return block.slice(start, stop - start)


@ray.remote(num_cpus=0)
def schema_of(block: pa.Table) -> pa.Schema:
    return block.schema


@ray.remote
def empty_output(op_class: type[Operator], params: dict[str, Any], step_id: str,
                 input_steps: tuple[str, ...], table: pa.Table) -> pa.Table:
    """The operator's output for an empty input (what the local executor returns then)."""
    op = op_class(params, step_id=step_id, input_steps=tuple(input_steps))
    return StepRunner(op, None).run(table)[0]


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s columns, in its order (missing ones null), as ``concat`` promotes."""
    if table.schema.equals(schema):
        return table
    return pa.concat_tables([schema.empty_table(), table], promote_options="permissive")
