"""The shards on Ray Data: prepare (tasks) -> embed (actor pool) -> write (tasks), streaming.

The dataset starts as one row per unfinished shard, one block each. ``_prepare``
(``batch_size=1``) turns a shard id into its chunk rows and yields them as one table,
which Ray keeps as one block (the dataset's ``target_max_block_size`` is raised so
it never slices it). The embed and write stages take whole blocks
(``batch_size=None``), so each call holds whole shards; both check it
(``check_whole``) and fail loudly rather than write part of a shard. The embed
actors are restartable: Ray Data's actor pools default to ``max_restarts=-1`` and
``max_task_retries=-1`` (passing them through ``ray_remote_args`` is deprecated in
Ray 2.60), so when an actor dies mid-shard Ray starts another and runs the shard
again; prepare and write tasks are retried by Ray's task defaults (3 retries when a
worker dies). A shard that kills every worker it lands on is therefore retried without
end: the progress bar stops moving; the fault is in the data or the model. Writers only add shard
folders; the driver consumes one small result row per shard and commits it, so the
manifest is touched by one process.

Resources: the embed pool takes the embed step's ``num_cpus``/``num_gpus``/
``concurrency`` (autoscaling up to the cluster's CPUs when unset). Prepare and write
tasks ask for no CPU: they are short, and a CPU held for them could leave an embed
actor that waits on their output without one.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Iterator

import pyarrow as pa

from flows.executors.ray_data import _quiet_ray_data
from flows.ingestion.errors import IngestError
from flows.ingestion.shards import Embedder, ShardJob, ShardResult, check_whole, prepare, write

log = logging.getLogger(__name__)

#: Blocks are never sliced below this size, so a shard stays one block.
BLOCK_BYTES = 4 * 1024 ** 3


def _prepare(batch: pa.Table, job: ShardJob) -> Iterator[pa.Table]:
    for shard in batch.column("shard").to_pylist():
        docs, _ = job.staged(shard)
        yield prepare(job, shard, docs)


class _Embed:
    """The embed actor: loads the model once, embeds whole shards."""

    def __init__(self, job: ShardJob):
        self.embedder = Embedder(job)

    def __call__(self, batch: pa.Table) -> Iterator[pa.Table]:
        for _, rows in check_whole(batch, "the embed stage"):
            out, embedded = self.embedder(rows)
            yield out.append_column("_embedded", pa.array([embedded] * out.num_rows, pa.int64()))


def _write(batch: pa.Table, job: ShardJob) -> Iterator[pa.Table]:
    from operators.store import Index

    index = None
    for shard, rows in check_whole(batch, "the write stage"):
        started = time.perf_counter()
        embedded = 0
        if "_embedded" in rows.column_names:
            embedded = rows.column("_embedded")[0].as_py()
            rows = rows.drop_columns(["_embedded"])
        index = index or Index.open(job.index_path)
        result = write(job, index, shard, rows, lambda s=shard: job.staged(s), chunks_embedded=embedded,
                       started=started)
        yield pa.Table.from_pylist([result.to_row()])


def run_shards(job: ShardJob, shards: list[str], on_result: Callable[[ShardResult], None], *,
               embed_options: dict[str, Any]) -> None:
    """Process ``shards`` on Ray Data, calling ``on_result`` on the driver as each one is written."""
    import ray

    if not shards:
        return
    if not ray.is_initialized():
        from flows.executors.ray_data import DEFAULT_RAY_INIT  # quiet, no dashboard

        ray.init(**DEFAULT_RAY_INIT)
    ds = ray.data.from_items([{"shard": s} for s in shards], override_num_blocks=len(shards))
    ctx = ds.context
    ctx.execution_options.preserve_order = False
    ctx.enable_progress_bars = False
    ctx.enable_operator_progress_bars = False
    ctx.print_on_execution_start = False
    ctx.target_max_block_size = BLOCK_BYTES
    ds = ds.map_batches(_prepare, fn_kwargs={"job": job}, batch_size=1, batch_format="pyarrow", num_cpus=0)
    if job.embed is not None:
        ds = _embed_stage(ds, job, embed_options, ray.cluster_resources(), n_shards=len(shards))
    ds = ds.map_batches(_write, fn_kwargs={"job": job}, batch_size=None, batch_format="pyarrow", num_cpus=0)
    try:
        with _quiet_ray_data():
            for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
                for row in batch.to_pylist():
                    on_result(ShardResult.from_row(row))
    except ray.exceptions.RayError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, Exception) and not isinstance(cause, ray.exceptions.RayError):
            raise IngestError(f"a shard failed on Ray: {type(cause).__name__}: {cause}") from err
        raise IngestError(f"a shard failed on Ray: {err}") from err


def _embed_stage(ds, job: ShardJob, options: dict[str, Any], resources: dict[str, float], *, n_shards: int):
    import ray

    num_cpus = options.get("num_cpus") or 1
    num_gpus = options.get("num_gpus") or 0
    if num_gpus > resources.get("GPU", 0):
        if num_gpus:
            log.warning("the embed step asks for %s GPU(s) per actor but the Ray cluster has %s: embedding on CPUs",
                        num_gpus, resources.get("GPU", 0))
        num_gpus = 0
    concurrency = options.get("concurrency")
    if concurrency:
        compute = ray.data.ActorPoolStrategy(size=concurrency)
    else:
        # As many actors as fit (one per shard at most), started at once: an autoscaling pool that
        # starts with one actor left the second core idle for most of a short job (0.47 of bare
        # encode on 10K glosses with min_size=1).
        fits = resources.get("GPU", 0) / num_gpus if num_gpus else resources.get("CPU", 1) / num_cpus
        compute = ray.data.ActorPoolStrategy(size=max(1, min(int(fits), n_shards)))
    kwargs = dict(fn_constructor_kwargs={"job": job}, batch_size=None, batch_format="pyarrow", compute=compute,
                  num_cpus=num_cpus, num_gpus=num_gpus or None)
    if num_gpus:  # map_batches refuses GPUs without a batch size; whole blocks are what we want
        return ds.map_batches_internal(_Embed, **kwargs)
    return ds.map_batches(_Embed, **kwargs)
