"""The shards on Ray Data: prepare -> embed -> write, streaming, each stage an actor pool.

The dataset starts as one row per unfinished shard, one block each. ``_Prepare``
(``batch_size=1``) turns a shard id into its chunk rows and yields them as one table,
which Ray keeps as one block (the dataset's ``target_max_block_size`` is raised so
it never slices it). The embed and write stages take whole blocks
(``batch_size=None``), so each call holds whole shards; both check it
(``check_whole``) and fail loudly rather than write part of a shard. Ray Data's actor
pools default to ``max_restarts=-1`` and ``max_task_retries=-1`` (passing them through
``ray_remote_args`` is deprecated in Ray 2.60), so when an actor dies mid-shard Ray
starts another and runs the shard again. A shard that kills every worker it lands on
is therefore retried without end: the progress bar stops moving; the fault is in the
data or the model. Writers only add shard folders; the driver consumes one small
result row per shard and commits it, so the manifest is touched by one process.
A shard that another ingest of the same source commits meanwhile (its staged files then go)
passes the stages as one placeholder row and comes back as done elsewhere (``staged_unless_done``).
So does a shard that prepare leaves with no row (every record of it failed to be read): Ray Data would carry
no empty block to the write stage, so its failures would never reach the driver's ledger (``_no_rows``).

Progress: each embed actor sends the documents of every encoder batch to the driver through
a ``ReportLine`` (the driver's reporter actor), and waits for them to arrive before its shard
leaves. A driver thread passes them to ``on_embedded`` as they come, and the driver passes on
everything that arrived before it commits a shard. So the bar moves while a large shard is
embedded, and a shard's documents are counted before its commit. The driver's side (that thread, the result
batches read on a thread of their own, stopping the dataset) is ``ray_results``.

Resources: the embed pool takes the embed step's ``num_cpus``/``num_gpus``/``concurrency`` (one
actor per CPU, or per GPU, when unset). Prepare (the chunk step's
``concurrency`` actors, else one per ``CPUS_PER_PREPARE`` CPUs) and write (as many actors as embed)
ask for no CPU: their work is short beside a CPU's embedding, and a CPU held for them could leave
an embed actor that waits on their output without one. Beside a GPU's embedding it is not short:
one prepare actor fed four embed actors on an H200 at about 10,000 documents/s. They are
long-lived actors, not tasks: a task stage started a worker process per shard, measurably slower
on WordNet's glosses (docs/results.md).
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa

from flows.executors import ray_metrics
from flows.executors.ray_env import configure_dataset, ensure_ray, quiet_ray_data
from flows.executors.ray_nodes import warn_when_no_cpu_free
from flows.ingestion.errors import IngestError
from flows.ingestion.embedder import Embedder
from flows.ingestion.ray_results import (POLL_SECONDS, STOP_SECONDS, EmbedProgress,  # noqa: F401 (re-exported)
                                         no_auto_init_at_exit, result_batches)
from flows.ingestion.shards import (ShardJob, ShardResult, check_whole, elsewhere_rows, is_elsewhere, make_chunker,
                                   make_enrichers, prepare, staged_unless_done, write)

log = logging.getLogger(__name__)

#: Blocks are never sliced below this size, so a shard stays one block.
BLOCK_BYTES = 4 * 1024 ** 3
#: ``_stage`` of the placeholder row of a shard that prepare left with no row (``_no_rows``).
NO_ROWS = "no rows"
#: Cluster CPUs per prepare actor when the chunk step sets no ``concurrency``: one on 2 to 7 CPUs, four on 16.
CPUS_PER_PREPARE = 4


def _no_rows(shard: str, rows: pa.Table) -> pa.Table:
    """One placeholder row, of the prepared columns, for a shard whose prepare gave no row: an empty block never
    reaches the write stage, which must still write the shard (nothing) and hand its failures to the driver, as
    the local executor does (``job._Run._commit`` records such a shard as finished, empty)."""
    row = pa.table({name: pa.nulls(1, rows.schema.field(name).type) for name in rows.column_names})
    for name, value in (("_shard", pa.array([shard], pa.string())), ("_shard_rows", pa.array([1], pa.int64())),
                        ("_error", pa.array(["no document left"], pa.string())),
                        ("_stage", pa.array([NO_ROWS], pa.string()))):
        row = row.set_column(row.schema.get_field_index(name), name, value.cast(rows.schema.field(name).type))
    return row


def _is_no_rows(rows: pa.Table) -> bool:
    return rows.num_rows == 1 and "_stage" in rows.column_names and rows.column("_stage")[0].as_py() == NO_ROWS


class _Prepare:
    """Staged shard -> chunk rows, in a long-lived actor (no worker process started per shard). A shard that
    another ingest of the same source committed meanwhile goes on as ``elsewhere_rows`` (as on the local path,
    ``staged_unless_done``): its staged files may be gone, and it needs no work."""

    def __init__(self, job: ShardJob):
        self.job = job
        self.chunker, self.enrichers = make_chunker(job), make_enrichers(job)  # set up once per actor, not per shard
        self.index = None

    def __call__(self, batch: pa.Table) -> Iterator[pa.Table]:
        from operators.store import Index

        for shard in batch.column("shard").to_pylist():
            self.index = self.index or Index.open(self.job.index_path, verify=False)
            staged = staged_unless_done(self.index, shard, self.job.staged)
            if staged is None:
                yield elsewhere_rows(shard)
                continue
            rows = prepare(self.job, shard, staged[0], self.chunker, self.enrichers)
            yield rows if rows.num_rows else _no_rows(shard, rows)


class _Embed:
    """The embed actor: loads the model once, embeds whole shards, reports documents as it embeds them."""

    def __init__(self, job: ShardJob, progress=None):
        self.progress = progress  # a ReportSender, or None
        self.embedder = Embedder(job, progress.send if progress is not None else None)
        self.index = Path(job.index_path).name

    def __call__(self, batch: pa.Table) -> Iterator[pa.Table]:
        for _, rows in check_whole(batch, "the embed stage"):
            if is_elsewhere(rows) or _is_no_rows(rows):
                yield _counted(rows, 0, 0)
                continue
            started = time.perf_counter()
            out, embedded, reused = self.embedder(rows)
            ray_metrics.record_embedded(self.index, embedded, time.perf_counter() - started)
            if self.progress is not None:
                self.progress.flush()  # the driver hears of these documents before the shard's commit
            yield _counted(out, embedded, reused)


def _counted(rows: pa.Table, embedded: int, reused: int) -> pa.Table:
    """One shard's rows with how many of its chunks were encoded and how many took a sync's kept vector (the
    write stage's report of the shard)."""
    for name, n in (("_embedded", embedded), ("_reused", reused)):
        rows = rows.append_column(name, pa.array([n] * rows.num_rows, pa.int64()))
    return rows


class _Write:
    """Whole shards -> shard folders in the index, in a long-lived actor; one result row per shard."""

    def __init__(self, job: ShardJob):
        self.job = job
        self.index = None

    def __call__(self, batch: pa.Table) -> Iterator[pa.Table]:
        from operators.store import Index

        job = self.job
        for shard, rows in check_whole(batch, "the write stage"):
            started = time.perf_counter()
            counts = {name: rows.column(name)[0].as_py() if name in rows.column_names else 0
                      for name in ("_embedded", "_reused")}
            rows = rows.drop_columns([name for name in counts if name in rows.column_names])
            self.index = self.index or Index.open(job.index_path)
            if is_elsewhere(rows):
                result = ShardResult.elsewhere(shard)
            else:
                rows = rows.slice(0, 0) if _is_no_rows(rows) else rows  # prepare's no rows, as local writes them
                result = write(job, self.index, shard, rows, lambda s=shard: job.staged(s),
                               chunks_embedded=counts["_embedded"], chunks_reused=counts["_reused"],
                               started=started)
            if not result.done_elsewhere:  # the other ingest's shard, not this one's
                ray_metrics.record_shard(Path(job.index_path).name, result)
            yield pa.Table.from_pylist([result.to_row()])


def run_shards(job: ShardJob, shards: list[str], on_result: Callable[[ShardResult], None], *,
               embed_options: dict[str, Any], on_embedded: Callable[[str, int], None] | None = None,
               prepare_actors: int | None = None) -> None:
    """Process ``shards`` on Ray Data, calling ``on_result`` on the driver as each one is written and
    ``on_embedded(shard, docs)`` as the embed actors report documents; ``prepare_actors``: the chunk step's
    ``concurrency`` (None: ``prepare_pool_size``'s)."""
    if not shards:
        return
    ensure_ray()
    no_auto_init_at_exit()
    with EmbedProgress(on_embedded if job.embed is not None else None) as progress:
        _run(job, shards, on_result, embed_options, progress, prepare_actors)


def prepare_pool_size(resources: dict[str, float], n_shards: int, concurrency: int | None = None) -> int:
    """How many prepare actors: ``concurrency`` when given, else one per ``CPUS_PER_PREPARE`` CPUs of the cluster;
    never more than there are shards."""
    wanted = concurrency or int(resources.get("CPU", 1)) // CPUS_PER_PREPARE
    return max(1, min(wanted, n_shards))


def _run(job: ShardJob, shards: list[str], on_result: Callable[[ShardResult], None], embed_options: dict[str, Any],
         progress: EmbedProgress, prepare_actors: int | None) -> None:
    import ray.data

    resources = ray.cluster_resources()
    warn_when_no_cpu_free(cluster=resources)  # a wait for CPUs that would pass without a word
    ds = ray.data.from_items([{"shard": s} for s in shards], override_num_blocks=len(shards))
    configure_dataset(ds, preserve_order=False).context.target_max_block_size = BLOCK_BYTES
    prepare_size = prepare_pool_size(resources, len(shards), prepare_actors)
    ds = ds.map_batches(_Prepare, fn_constructor_kwargs={"job": job}, batch_size=1, batch_format="pyarrow",
                        compute=ray.data.ActorPoolStrategy(size=prepare_size), num_cpus=0)
    workers = max(1, min(int(resources.get("CPU", 1)), len(shards)))
    if job.embed is not None:
        ds, workers = _embed_stage(ds, job, embed_options, resources, n_shards=len(shards), progress=progress.sender())
    ds = ds.map_batches(_Write, fn_constructor_kwargs={"job": job}, batch_size=None, batch_format="pyarrow",
                        compute=ray.data.ActorPoolStrategy(size=workers), num_cpus=0)
    try:
        with quiet_ray_data(), contextlib.closing(result_batches(ds, progress)) as batches:
            for batch in batches:
                progress.deliver()  # every document these shards' embed actors reported comes first
                for row in batch.to_pylist():
                    on_result(ShardResult.from_row(row))
    except ray.exceptions.RayError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, Exception) and not isinstance(cause, ray.exceptions.RayError):
            raise IngestError(f"a shard failed on Ray: {type(cause).__name__}: {cause}") from err
        raise IngestError(f"a shard failed on Ray: {err}") from err


def embed_resources(options: dict[str, Any], resources: dict[str, float], n_shards: int
                    ) -> tuple[int, float | None, float]:
    """The embed pool's size, and each actor's ``num_cpus`` and ``num_gpus`` (the step's, ``options``).

    A GPU actor's one CPU (the ingest spec's ``num_cpus: 1``, beside ``num_gpus``) is left to Ray Data (None: not
    passed), which gives a GPU actor one CPU unless told otherwise: passed both, it warns that they are
    "experimental" together."""
    num_cpus = options.get("num_cpus") or 1
    num_gpus = options.get("num_gpus") or 0
    if num_gpus > resources.get("GPU", 0):
        if num_gpus:
            log.warning("the embed step asks for %s GPU(s) per actor but the Ray cluster has %s: embedding on CPUs",
                        num_gpus, resources.get("GPU", 0))
        num_gpus = 0
    size = options.get("concurrency")
    if not size:
        # As many actors as fit (one per shard at most), started at once: an autoscaling pool that
        # starts with one actor left the second core idle for most of a short job (0.47 of bare
        # encode on 10K glosses with min_size=1).
        fits = resources.get("GPU", 0) / num_gpus if num_gpus else resources.get("CPU", 1) / num_cpus
        size = max(1, min(int(fits), n_shards))
    return size, (None if num_gpus and num_cpus == 1 else num_cpus), num_gpus


def _embed_stage(ds, job: ShardJob, options: dict[str, Any], resources: dict[str, float], *, n_shards: int,
                 progress=None):
    """The embed actor pool appended to ``ds``, and its size."""
    import ray.data

    size, num_cpus, num_gpus = embed_resources(options, resources, n_shards)
    kwargs = dict(fn_constructor_kwargs={"job": job, "progress": progress}, batch_size=None, batch_format="pyarrow",
                  compute=ray.data.ActorPoolStrategy(size=size), num_cpus=num_cpus, num_gpus=num_gpus or None)
    if num_gpus:  # map_batches refuses GPUs without a batch size; whole blocks are what we want
        return ds.map_batches_internal(_Embed, **kwargs), size
    return ds.map_batches(_Embed, **kwargs), size
