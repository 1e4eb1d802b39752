"""A step's output on Ray: a lazy dataset, or materialised blocks, and the reshaping between stages.

Order, fan-in, reuse
    Every dataset the executor creates preserves order, so each step's output is its
    input's rows in order and the final table equals the local executor's. A fan-in
    materialises its parents, conforms every block to the schema the local executor's
    ``concat`` would give (columns missing from a parent become nulls; Ray's ``union``
    requires equal schemas) and concatenates the block lists in ``inputs`` order. A step
    read by two or more later steps is materialised once, and each branch reads the same
    immutable Arrow blocks, so branches cannot change each other's data.

Regrouping
    A query step over a dataset that is not aligned (``ray_plan``) regroups it with plain
    Ray tasks (``_ray_blocks.regroup``): one task per block counts its qids, the driver
    ranks the qids by first appearance (the local executor's group order) and cuts them
    into the local executor's batches, one task per block splits it by partition and one
    task per partition concatenates its pieces. Ray Data's ``groupby().map_groups()``
    orders groups by hash or by qid, so restoring the local order would take a second
    shuffle (a sort), and it calls the operator once per group.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa
import ray
import ray.data

from flows.executors import _ray_blocks as block_tasks
from flows.executors.base import fan_in
from flows.executors.ray_env import configure_dataset


@dataclass
class Frame:
    """A step's output: a lazy dataset, or materialised blocks in order."""

    ds: Any = None                      # ray.data.Dataset while lazy
    blocks: list[Any] | None = None     # ObjectRefs of Arrow tables once materialised
    rows: list[int] | None = None       # rows per block, once materialised
    schemas: list[pa.Schema | None] | None = None  # per block where Ray told us, once materialised
    aligned: bool = False               # every qid's rows lie in one block
    one_row_per_qid: bool = False       # at most one row per qid (the queries table)
    pending: list[str] = field(default_factory=list)  # steps computed lazily in ``ds``

    @property
    def empty(self) -> bool:
        """Materialised with no blocks: nothing to run on."""
        return self.blocks is not None and not self.blocks


def dataset_of(frame: Frame) -> Any:
    if frame.ds is not None:
        return frame.ds
    return configure_dataset(ray.data.from_arrow_refs(list(frame.blocks)))


def materialize(frame: Frame, on_done: Callable[[str], None]) -> None:
    """Run a lazy frame and keep its blocks; ``on_done`` hears of every step it computed."""
    if frame.blocks is not None:
        return
    materialized = frame.ds.materialize()
    blocks, rows, schemas = [], [], []
    for bundle in materialized.iter_internal_ref_bundles():  # no public API lists a dataset's block refs
        known = bundle.schema if len(bundle.blocks) == 1 and isinstance(bundle.schema, pa.Schema) else None
        for entry, piece in zip(bundle.blocks, bundle.slices):
            schemas.append(known)
            if piece is None:
                blocks.append(entry.ref)
                rows.append(entry.metadata.num_rows)
            else:
                blocks.append(block_tasks.slice_block.remote(entry.ref, piece.start_offset, piece.end_offset))
                rows.append(piece.end_offset - piece.start_offset)
    frame.blocks, frame.rows, frame.schemas, frame.ds = blocks, rows, schemas, None
    for step in frame.pending:
        on_done(step)
    frame.pending = []


def schemas_of(frame: Frame) -> list[pa.Schema]:
    """Each block's schema: from Ray's metadata where it has it, else read by a task."""
    known = frame.schemas or [None] * len(frame.blocks)
    missing = [i for i, schema in enumerate(known) if schema is None]
    fetched = ray.get([block_tasks.schema_of.remote(frame.blocks[i]) for i in missing])
    frame.schemas = list(known)
    for i, schema in zip(missing, fetched):
        frame.schemas[i] = schema
    return frame.schemas


def schema_table(frame: Frame) -> pa.Table | None:
    """An empty table with a materialised frame's columns (as ``concat`` would unify them); None if unknown."""
    schemas = [schema for schema in schemas_of(frame) if len(schema)] if frame.blocks else []
    return pa.unify_schemas(schemas, promote_options="permissive").empty_table() if schemas else None


def union(step: str, frames: list[Frame], parents: tuple[str, ...], empty_tables: list[pa.Table]) -> Frame:
    """Parents' blocks in ``inputs`` order, conformed to the schema ``concat`` gives (frames materialised)."""
    refs = [ref for frame in frames for ref in frame.blocks]
    rows = [n for frame in frames for n in frame.rows]
    schema = fan_in(step, empty_tables, parents).schema
    return Frame(blocks=[block_tasks.conform_block.remote(ref, schema) for ref in refs], rows=rows)


def regroup(frame: Frame, batch_size: int | None) -> Frame:
    """Whole qid groups per block, in the local executor's order and batches (a shuffle; materialised)."""
    if not frame.blocks or not any(frame.rows):
        return Frame(blocks=frame.blocks, rows=frame.rows, aligned=True)
    schema = pa.unify_schemas(schemas_of(frame), promote_options="permissive")
    if "qid" not in schema.names:  # one call, so the operator reports the missing column
        return coalesce(frame)
    regrouped, rows = block_tasks.regroup(frame.blocks, frame.rows, schema.field("qid").type, batch_size)
    return Frame(blocks=regrouped, rows=rows, aligned=True)


def spread(frame: Frame, most_rows: int) -> Frame:
    """The blocks cut into pieces of about ``most_rows`` rows, in order, each qid's rows in one piece where the frame
    is aligned (materialised): a model step's input, so that every actor of its pool gets some (``ray_plan``)."""
    big = [i for i, n in enumerate(frame.rows) if n > most_rows]
    bounds = dict(zip(big, ray.get([block_tasks.even_bounds_of.remote(frame.blocks[i], -(-frame.rows[i] // most_rows),
                                                                      frame.aligned) for i in big])))
    blocks, rows, schemas = [], [], []
    for i, (ref, n) in enumerate(zip(frame.blocks, frame.rows)):
        cuts = bounds.get(i, [0, n])
        for start, stop in zip(cuts, cuts[1:]):
            blocks.append(ref if stop - start == n else block_tasks.slice_block.remote(ref, start, stop))
            rows.append(stop - start)
            schemas.append(frame.schemas[i] if frame.schemas else None)
    return Frame(blocks=blocks, rows=rows, schemas=schemas, aligned=frame.aligned,
                 one_row_per_qid=frame.one_row_per_qid)


def coalesce(frame: Frame) -> Frame:
    """Everything in one block, for a corpus step (materialised)."""
    if len(frame.blocks) <= 1:
        return Frame(blocks=frame.blocks, rows=frame.rows, aligned=True)
    return Frame(blocks=[block_tasks.concat_blocks.remote(*frame.blocks)], rows=[sum(frame.rows)], aligned=True)
