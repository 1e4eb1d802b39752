"""The Ray Data executor: every step (or fused chain of row steps) is a ``map_batches`` stage.

``RayDataExecutor().run(flow, queries)`` returns the same ``FlowResult`` as the local
executor: the same final table (rows, order, schema), the same step records, hit
ratios, metadata and history. Operators know nothing of Ray; this module wraps each
one in a small callable class (``_StepUDF``, in ``_ray_udfs``) that Ray Data runs on an actor pool
(or, for operators without a ``setup``, as tasks: see Resources):
``__init__`` builds the operator from its class and params, once per actor, and wraps
a ``StepRunner`` (so the step cache works exactly as in the local executor: units are
rows, qid groups or the corpus, whatever the batching). As in the local executor, the
operator sets itself up (``ensure_setup()``, once per actor) on its first call, so an
actor whose batches all come from the cache never loads a model; a source sets up
when its actor starts, since it reads at once.
Per-step ``batch_size``, ``concurrency``, ``num_cpus`` and ``num_gpus`` come from
``flow.step_option``.

How each scope is run
---------------------

* ``row``: ``map_batches(batch_size=<step batch size>)``.
* ``query``: every call must see whole qid groups. A dataset is *aligned* when every
  qid's rows lie in one block; then the step runs with ``batch_size=None`` (a call
  sees a whole block) and the callable cuts the block into whole-group batches of
  about ``batch_size`` rows, the local executor's rule. The rule for alignment:

  - the flow input, cut into a few blocks per CPU between qid runs: aligned
    (if a qid's rows are not together, it is cut anywhere and is not aligned);
  - the output of a query or corpus step: aligned (a call yields each batch's
    output in pieces of whole groups below 16 MiB, and Ray cuts blocks between
    yields; it slices a yielded table only above half of ``target_max_block_size``,
    64 MiB by default);
  - the output of a row step: aligned only if its batches cannot split a qid:
    its input had at most one row per qid (the queries table, so a retriever
    over the queries feeds a reranker without a shuffle) or it ran on whole
    blocks of an aligned input (``batch_size=None``);
  - a fan-in, a source, or anything else: not aligned.

  A query step over a dataset that is not aligned first *regroups* it, a shuffle
  (``_ray_blocks.regroup``): the input is materialised, one task per block counts its
  qids, the driver ranks the qids by first appearance (the local executor's group
  order) and cuts the groups into the local executor's batches
  (``base.query_batch_ends``, the rule ``scope_batches`` uses), one task per block
  splits it by partition and one task per partition concatenates its pieces and
  sorts them stably by group rank. The result is aligned, in the local executor's row order.
  We do this with Ray tasks rather than ``groupby("qid").map_groups()`` because
  that orders groups by hash or by qid, not by first appearance, so restoring the
  local order would need a second shuffle (a sort), and calls the operator once per
  group; on 2 cores a Ray Data sort of 10K rows took 4.6-6.5 s where these tasks
  took 0.05 s (warm workers; the first regroup on a cluster also starts them).
* ``corpus``: the input is materialised and concatenated into one block (one
  task), then one call sees it all.
* ``source``: the driver asks the operator for its ``splits()``; a dataset of split
  indices (``from_items``) is mapped with batch size 1 by ``_SourceUDF``, which
  reads split *i* with ``op.read(split)`` on the actor pool and yields its batches.
  Splits travel pickled when they can; otherwise each actor recomputes them.

Order, fan-in, reuse, history
-----------------------------

Every dataset we create gets its own copy of the current ``DataContext`` with
``preserve_order=True`` and Ray Data's progress bars and start-of-execution log
turned off; the global context is never changed. With order preserved, each step's
output is its input's rows in order, so the final table equals the local one.

A fan-in (several inputs) materialises its parents, conforms every block to the
schema the local executor's ``concat`` would give (columns missing from a parent
become nulls; Ray's ``union`` requires equal schemas) and concatenates the block
lists in ``inputs`` order.

A step read by two or more later steps is materialised once (``materialize()``);
each branch reads the same immutable Arrow blocks, so branches cannot change each
other's data. With ``keep_history=True`` (the default, as in the local executor)
*every* step is materialised so its output can be kept: steps then run one after
another, each one in parallel. ``keep_history=False`` streams steps into each other
and materialises only where the rules above need it (fan-in parents, shared steps,
regroups, corpus inputs, the output).

Fusion (``keep_history=False`` only): a row step whose only input is a row step or a
source, read by nothing else and not the output, with the same ``num_gpus``, runs in
its parent's stage, so a chain such as source -> row -> row is one ``map_batches``
(the callables in ``_ray_udfs`` pass each batch through one ``StepRunner`` per step,
cut to each step's own ``batch_size``, and report every step's ``BatchStats``, so
records, metadata and progress are those of separate stages). The stage takes its
first step's ``concurrency`` and the largest ``num_cpus``; a fused chain shows as a
``fused:<step>+<step>...`` timing (0 s).

Resources
---------

A stage whose operators each have no ``setup`` (word counts, fusion, top-k, sources that
read files) or a ``light_setup`` (a word list, a stemmer) and that sets no ``concurrency``
and no GPU runs as Ray tasks (``_ray_udfs.run_as_task``): the callable is built for each
batch, on workers that are already running, and a light operator is set up once per worker
process and kept there (``_ray_udfs._make_op``). Starting an actor pool costs a worker
process and its imports per stage, which on 2 cores measured about 2 s a stage quiet and
over 10 s busy, against 0.3 s for tasks. Every other stage (models, indices, a source whose
splits cannot be pickled) gets an actor pool, so its operator sets up once per actor. The
rest of this section is about actor pools; tasks hold no resources between batches.

Streamed stages hold their actors at the same time. If a chain of streamed stages
needs more CPUs (or GPUs) than the cluster has for one actor each, it is materialised
before the next stage is added, since otherwise a later stage's actor could hold the
CPU that an earlier stage waits for, and the run would hang. A pool without a fixed
``concurrency`` autoscales from one actor, or from as many as the cluster fits when
it reads materialised blocks. A ``num_gpus`` hint above the cluster's GPUs is dropped
with a warning (the step runs on CPUs, as it does locally).

Progress, cancellation, errors
------------------------------

A small actor (``_Reporter``, no CPU; one per driver, its runs kept apart by a run id,
so no run waits for an actor to start) collects what each batch did: callables send it
their ``BatchStats`` after every batch, before the batch's rows leave the callable, and
learn from the answer whether the run was cancelled (before a batch they ask again
unless they heard within 0.1 s). The driver polls it every 0.2 s,
feeds ``RunState`` (step records, hit ratios, metadata, timings, progress events, all
as the local executor does), and sets the cancel flag when the ``CancelToken`` is
cancelled; the next batch raises ``FlowCancelled`` and the run stops. An error on the
caller's side (a progress callback that raises, Ctrl-C) cancels the run the same way,
and waits for the stages to stop before it reaches the caller. A step counts
as done when its output is materialised, or at the end for streamed steps. Ray hands
back only the text of an exception raised in a callable, so a callable sends an
operator's ``TesseraError`` to the reporter first and the driver raises it again,
with its type, step and operator; other failures come as Ray's exceptions.

Known limits: if Ray re-runs a batch after a worker died, its statistics count
twice (the rows do not); blocks of one step whose schemas differ (a source whose
files have different columns) are conformed only where they meet a fan-in, so a row
step may see a batch without a column that the local executor would fill with
nulls; a single qid whose rows from one batch exceed half of
``target_max_block_size`` (64 MiB) may be sliced across blocks, which the alignment
rule does not notice.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import queue
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
import ray.data  # imported now: it configures the ray.data loggers (see _quiet_ray_data)

from flows.cache import StepCache
from flows.executors import _ray_blocks as block_tasks
from flows.executors._ray_udfs import (  # noqa: F401
    _SourceUDF, _StepUDF, _whole_group_pieces, run_as_task, shared_reporter)
from flows.executors.base import RunState, as_flow, as_queries, fan_in
from flows.progress import CancelToken, ProgressCallback
from flows.result import FlowResult
from flows.spec import Flow, FlowSpec
from operators.base import Operator
from operators.errors import FlowCancelled, SpecError, TesseraError
from operators.tables import concat

log = logging.getLogger(__name__)

#: The flow input is cut into blocks of at least this many rows, at most this many per CPU.
INPUT_BLOCK_ROWS = 4096
INPUT_BLOCKS_PER_CPU = 2
#: Actors an autoscaling pool starts with at most; and rows of materialised input per
#: actor it starts with (an actor costs a process start: 1-2 s on 2 loaded cores).
INITIAL_ACTORS_MAX = 8
INITIAL_ROWS_PER_ACTOR = 16384
#: Seconds between two polls of the progress reporter by the driver.
POLL_SECONDS = 0.2

DEFAULT_RAY_INIT = {
    "ignore_reinit_error": True,
    "include_dashboard": False,
    "logging_level": logging.WARNING,
}


def runs_as_tasks(flow: Flow, stage: tuple[str, ...]) -> bool:
    """Whether a stage runs as Ray tasks rather than on an actor pool: each of its operators has no
    ``setup`` or a ``light_setup`` (nothing worth an actor of its own), and it asks for no ``concurrency``
    (a number of actors) and no GPU. See Resources in the module docstring."""
    ops = [flow.operators[step] for step in stage]
    return (all(type(op).setup is Operator.setup or op.light_setup for op in ops)
            and not flow.step_option(stage[0], "concurrency") and not flow.step_option(stage[0], "num_gpus"))


class RayDataExecutor:
    """Runs a flow as Ray Data stages; same results as ``LocalExecutor``.

    ``ray.init(**ray_init_kwargs)`` (quiet, no dashboard) is called only when Ray is
    not initialised yet. ``keep_history=False`` lets steps stream into each other.
    """

    name = "ray"

    def __init__(self, *, cache: StepCache | None = None, keep_history: bool = True,
                 ray_init_kwargs: dict[str, Any] | None = None):
        self.cache = cache
        self.keep_history = keep_history
        self.ray_init_kwargs = dict(ray_init_kwargs or {})

    def run(
        self,
        flow: Flow | FlowSpec | str,
        queries: pa.Table | str | Iterable[str] | None = None,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> FlowResult:
        flow = as_flow(flow)
        placed = [s for s in flow.needed_steps() if flow.spec.steps[s].placement is not None]
        if placed:  # a Ray Data actor is not where a Serve handle's blocking calls belong
            raise SpecError(f"step '{placed[0]}' has a placement (a Serve deployment): placed steps run with the "
                            "local executor (--executor local), the one the Serve API runs flows with",
                            step=placed[0], field="placement")
        state = RunState(flow, self.name, cache=self.cache, progress=progress, cancel=cancel)
        flow_input = as_queries(queries)
        state.cancel.raise_if_cancelled()
        self._ensure_ray()
        with _quiet_ray_data():
            return _Run(flow, state, flow_input, keep_history=self.keep_history).execute()

    def _ensure_ray(self) -> None:
        if not ray.is_initialized():
            ray.init(**{**DEFAULT_RAY_INIT, **self.ray_init_kwargs})


# -- the driver ---------------------------------------------------------------------


@dataclass
class _Frame:
    """A step's output: a lazy dataset, or materialised blocks in order."""

    ds: Any = None                      # ray.data.Dataset while lazy
    blocks: list[Any] | None = None     # ObjectRefs of Arrow tables once materialised
    rows: list[int] | None = None       # rows per block, once materialised
    schemas: list[pa.Schema | None] | None = None  # per block where Ray told us, once materialised
    aligned: bool = False               # every qid's rows lie in one block
    one_row_per_qid: bool = False       # at most one row per qid (the queries table)
    pending: list[str] = field(default_factory=list)  # steps computed lazily in ``ds``


class _Run:
    """One run: builds the stages on a worker thread while this thread reports progress."""

    def __init__(self, flow: Flow, state: RunState, flow_input: pa.Table, *, keep_history: bool):
        self.flow = flow
        self.state = state
        self.flow_input = flow_input
        self.keep_history = keep_history
        self.frames: dict[str, _Frame] = {}
        self.tables: dict[str, pa.Table] = {}
        self.empty: dict[str, pa.Table] = {}
        self.input: _Frame | None = None
        self.resources = ray.cluster_resources()
        self.cpu_fallback: set[str] = set()
        # From the worker thread: ("done", step) once a step's output is materialised,
        # ("time", name, seconds) for driver-side work (RunState is this thread's only).
        self.messages: queue.Queue[tuple] = queue.Queue()
        self.finished: set[str] = set()
        self.current: str | None = None     # the step the worker thread is building
        self.last_step: str | None = None   # the step of the last batch reported
        self.error: BaseException | None = None
        self.reporter: Any = None
        self.run_id = uuid.uuid4().hex  # this run's key in the shared reporter
        self.stage_of: dict[str, tuple[str, ...]] = {}  # each step's stage (a fused chain or itself)

    # -- the calling thread: progress, cancellation, the result ---------------------

    def execute(self) -> FlowResult:
        state = self.state
        self.reporter = shared_reporter()
        ray.get(self.reporter.open.remote(self.run_id))  # before any batch can report
        worker = threading.Thread(target=self._work, name=f"tessera-ray-{self.flow.name}", daemon=True)
        worker.start()
        cancel_sent = False
        remote_error = None
        try:
            while worker.is_alive():
                worker.join(POLL_SECONDS)
                if state.cancel.cancelled and not cancel_sent:
                    self.reporter.cancel.remote(self.run_id)
                    cancel_sent = True
                    _quiet_failures()  # the stages fail on purpose now
                self._pump()
            self._pump()
            if self.error is not None:
                remote_error = ray.get(self.reporter.error.remote(self.run_id))
        except BaseException:  # the caller's side failed (a progress callback, Ctrl-C): the run ends with it
            self._stop(worker, cancel_sent)
            raise
        finally:
            with contextlib.suppress(ray.exceptions.RayError):
                self.reporter.close.remote(self.run_id)
        if self.error is not None:
            self._raise(self.error, remote_error)
        for step in state.steps:  # steps that streamed, or had no rows
            self._start(step)
            if step not in self.finished:
                self.finished.add(step)
                state.finish_step(step, None, False)
        state.result.steps = {step: state.result.steps[step] for step in state.steps}
        if self.keep_history:
            for step in state.steps:
                state.result.history[step] = self.tables[step]
        return state.finish(self.tables[self.flow.output])

    def _stop(self, worker: threading.Thread, cancel_sent: bool) -> None:
        """Cancel the stages and wait for the worker thread (at most a batch per actor), so nothing
        of the run outlives the call: stages left running would hold the cluster's CPUs, and
        fail loudly once the reporter is gone."""
        _quiet_failures()
        if not cancel_sent:
            with contextlib.suppress(ray.exceptions.RayError):
                self.reporter.cancel.remote(self.run_id)
        worker.join()

    def _pump(self) -> None:
        """Feed ``RunState`` with the batches reported so far, then close finished steps."""
        messages = []
        while True:  # steps materialised before the drain below: all their batches are in it
            try:
                messages.append(self.messages.get_nowait())
            except queue.Empty:
                break
        try:
            events = ray.get(self.reporter.drain.remote(self.run_id))
        except ray.exceptions.RayError:
            events = []
        for _, step, stats in events:
            self.last_step = step
            self._start(step)
            self.state.add_batch(step, stats)
        for kind, *args in messages:
            if kind == "time":
                self.state.result.timings.add(*args)
                continue
            step = args[0]
            self._start(step)
            if step not in self.finished:
                self.finished.add(step)
                self.state.finish_step(step, None, False)

    def _start(self, step: str) -> None:
        if step not in self.state.result.steps:
            self.state.start_step(step)

    def _raise(self, error: BaseException, remote: tuple | None) -> None:
        if self.state.cancel.cancelled:
            raise FlowCancelled(self.state.cancel.reason or "cancelled",
                                step=self.last_step or self.current) from None
        if isinstance(error, TesseraError):  # raised here, on the driver
            raise error
        if remote is not None:  # an operator's error, as the operator raised it
            cls, message, step, op, field_ = remote
            raise cls(message, step=step, op=op, field=field_) from error
        raise error

    # -- the worker thread: stages ---------------------------------------------------

    def _work(self) -> None:
        try:
            flow, state = self.flow, self.state
            consumers = {s: [c for c in flow.consumers[s] if c in state.steps] for s in state.steps}
            for stage in self._plan(consumers):
                step = stage[-1]
                self.current = stage[0]
                state.cancel.raise_if_cancelled(stage[0])
                frame = self._run_stage(stage)
                for fused in stage[:-1]:  # never read: only for _empty_output's walk up the chain
                    self.frames[fused] = _Frame()
                self.frames[step] = frame
                if self.keep_history or len(consumers[step]) > 1 or step == flow.output:
                    self._materialize(frame)
            self.current = None
            for step in state.steps if self.keep_history else [flow.output]:
                self.tables[step] = self._collect(step)
        except BaseException as err:  # handed to the calling thread
            self.error = err

    def _plan(self, consumers: dict[str, list[str]]) -> list[tuple[str, ...]]:
        """The stages, in run order: one step each, or a fused chain (see the module docstring)."""
        flow, stages, stage_of = self.flow, [], {}
        for step in self.state.steps:
            parents = flow.inputs[step]
            parent = parents[0] if len(parents) == 1 else None
            stage = stage_of.get(parent)
            if (not self.keep_history and stage is not None and stage[-1] == parent
                    and flow.operators[step].scope == "row" and consumers[parent] == [step]
                    and parent != flow.output and flow.operators[parent].scope in ("row", "source")
                    and (flow.step_option(step, "num_gpus") or 0) == (flow.step_option(parent, "num_gpus") or 0)):
                index = stages.index(stage)
                stages[index] = stage = stage + (step,)
                for member in stage:
                    stage_of[member] = stage
            else:
                stages.append((step,))
                stage_of[step] = (step,)
        for stage in stages:
            if len(stage) > 1:
                self.messages.put(("time", "fused:" + "+".join(stage), 0.0))
        self.stage_of = stage_of
        return stages

    def _run_stage(self, stage: tuple[str, ...]) -> _Frame:
        flow = self.flow
        step = stage[0]
        op = flow.operators[step]
        parents = flow.inputs[step]
        if op.scope == "source":
            return self._read_source(stage, op)
        if not parents:
            source = self._input_frame()
        elif len(parents) == 1:
            source = self.frames[parents[0]]
        else:
            source = self._fan_in(step, parents)
        batch_size = flow.step_option(step, "batch_size")
        if op.scope == "query":
            if not source.aligned:
                start = time.perf_counter()
                source = self._regroup(source, batch_size)
                self.messages.put(("time", f"regroup:{step}", time.perf_counter() - start))
            out_aligned, stage_batch_size = True, None
        elif op.scope == "corpus":
            source = self._coalesce(source)
            out_aligned, stage_batch_size = True, None
        else:
            out_aligned = source.one_row_per_qid or (source.aligned and not batch_size)
            stage_batch_size = batch_size or None
            for fused in stage[1:]:  # as if each ran on its own: it would cut qids with a batch size
                out_aligned = out_aligned and not flow.step_option(fused, "batch_size")
        if source.blocks is not None and not source.blocks:  # nothing to run on
            return _Frame(blocks=[], rows=[], aligned=True)
        if source.ds is not None and not self._fits(source.pending + list(stage)):
            # Streamed stages hold their actors together: if the cluster cannot hold
            # one actor of each, a stage could wait for ever on one that waits for it.
            self._materialize(source)
        # A stage streamed after another starts with one actor; one over materialised
        # blocks with as many as the cluster, the blocks and the rows warrant.
        inputs = 1 if source.ds is not None else min(
            len(source.blocks), -(-sum(source.rows) // INITIAL_ROWS_PER_ACTOR))
        ds = self._dataset_of(source)
        udf_kwargs = self._udf_kwargs(stage, op)
        udf_kwargs.update(cache=self.state.step_cache(step), batch_size=batch_size or None)
        ds = self._map(ds, stage, _StepUDF, udf_kwargs, stage_batch_size, inputs=inputs)
        pending = (source.pending if source.ds is not None else []) + list(stage)
        return _Frame(ds=ds, aligned=out_aligned, pending=pending)

    def _input_frame(self) -> _Frame:
        """The flow input, cut into blocks for parallelism, at qid boundaries where it can."""
        if self.input is None:
            table = self.flow_input
            n = table.num_rows
            cpus = max(1, int(self.resources.get("CPU", 1)))
            parts = max(1, min(-(-n // INPUT_BLOCK_ROWS), INPUT_BLOCKS_PER_CPU * cpus))
            aligned, one_row_per_qid = True, False
            bounds = [round(i * n / parts) for i in range(parts + 1)]
            if "qid" in table.column_names and n:
                qids = table.column("qid").to_numpy(zero_copy_only=False)
                runs = np.flatnonzero(qids[1:] != qids[:-1]) + 1  # where a new qid run starts
                distinct = pc.count_distinct(table.column("qid")).as_py()
                one_row_per_qid = distinct == n
                if len(runs) + 1 == distinct:  # each qid's rows together: cut between runs only
                    starts = np.r_[runs, n]
                    bounds = sorted({0, n, *(int(starts[np.searchsorted(starts, b)]) for b in bounds[1:-1])})
                else:
                    aligned = parts == 1
            else:
                aligned = parts == 1
            pieces = [table.slice(a, b - a) for a, b in zip(bounds, bounds[1:]) if b > a] or [table]
            blocks = [ray.put(piece) for piece in pieces]
            self.input = _Frame(blocks=blocks, rows=[p.num_rows for p in pieces], aligned=aligned,
                                one_row_per_qid=one_row_per_qid, schemas=[table.schema] * len(blocks))
        return self.input

    def _read_source(self, stage: tuple[str, ...], op: Operator) -> _Frame:
        op.ensure_setup()  # as the local executor does, for splits()
        splits = op.splits()
        if not splits:
            return _Frame(blocks=[], rows=[])
        try:
            pickle.dumps(splits)
            shipped: list[Any] | None = splits
        except Exception:  # recomputed by each actor
            shipped = None
        kwargs = {**self._udf_kwargs(stage, op), "splits": shipped}
        ds = self._dataset(ray.data.from_items([{"split_index": i} for i in range(len(splits))]))
        return _Frame(ds=self._map(ds, stage, _SourceUDF, kwargs, 1, inputs=len(splits), tasks=shipped is not None),
                      pending=list(stage))

    def _udf_kwargs(self, stage: tuple[str, ...], op: Operator) -> dict[str, Any]:
        """The callable's arguments: the stage's first step, then the row steps fused after it."""
        flow, step = self.flow, stage[0]
        rows = [{"op_class": type(flow.operators[s]), "params": flow.operators[s].params.model_dump(),
                 "step_id": s, "input_steps": tuple(flow.inputs[s]), "cache": self.state.step_cache(s),
                 "batch_size": flow.step_option(s, "batch_size") or None} for s in stage[1:]]
        return {"op_class": type(op), "params": op.params.model_dump(), "step_id": step,
                "input_steps": tuple(flow.inputs[step]), "reporter": self.reporter, "run": self.run_id, "rows": rows}

    def _resources(self, stage: tuple[str, ...]) -> tuple[int | None, float | None, float]:
        """A stage's ``concurrency`` (its first step's), ``num_cpus`` (the most) and ``num_gpus``."""
        cpus = [c for c in (self.flow.step_option(s, "num_cpus") for s in stage) if c is not None]
        return (self.flow.step_option(stage[0], "concurrency"), max(cpus) if cpus else None,
                self._num_gpus(stage[0]))

    def _fits(self, steps: list[str]) -> bool:
        """Whether the cluster holds the smallest actor pools of these steps' stages at once."""
        cpus = gpus = 0.0
        for stage in dict.fromkeys(self.stage_of.get(step, (step,)) for step in steps):
            if runs_as_tasks(self.flow, stage):
                continue
            concurrency, num_cpus, num_gpus = self._resources(stage)
            actors = concurrency or 1
            cpus += (num_cpus or 0) * actors
            gpus += num_gpus * actors
        return cpus <= self.resources.get("CPU", 0) + 1e-9 and gpus <= self.resources.get("GPU", 0) + 1e-9

    def _num_gpus(self, step: str) -> float:
        """The step's GPU hint; 0 on a cluster without that many GPUs (it runs on CPUs, as locally)."""
        wanted = self.flow.step_option(step, "num_gpus") or 0
        if wanted > self.resources.get("GPU", 0):
            if wanted and step not in self.cpu_fallback:
                self.cpu_fallback.add(step)
                log.warning("step '%s' asks for %s GPU(s) per actor but the Ray cluster has %s: running it "
                            "on CPUs", step, wanted, self.resources.get("GPU", 0))
            return 0
        return wanted

    def _map(self, ds: Any, stage: tuple[str, ...], udf: type, kwargs: dict[str, Any],
             batch_size: int | None, *, inputs: int, tasks: bool = True) -> Any:
        """``ds`` through the stage's callable: as tasks where ``runs_as_tasks`` allows (and ``tasks``: a
        source whose splits cannot travel computes them once per actor instead), else on an actor pool."""
        concurrency, num_cpus, num_gpus = self._resources(stage)
        num_gpus = num_gpus or None
        if tasks and runs_as_tasks(self.flow, stage):
            return ds.map_batches(run_as_task, fn_kwargs={"udf": udf, "kwargs": kwargs}, batch_size=batch_size,
                                  batch_format="pyarrow", num_cpus=num_cpus)
        if concurrency:
            compute = ray.data.ActorPoolStrategy(size=concurrency)
        else:
            # Autoscaling, from as many actors as the cluster fits and ``inputs`` can
            # keep busy (a stage streamed after another gets inputs=1, so that it
            # cannot take the resources the earlier one needs).
            fits = [self.resources.get("CPU", 0) / num_cpus if num_cpus else float("inf"),
                    self.resources.get("GPU", 0) / num_gpus if num_gpus else float("inf"), inputs]
            initial = max(1, min(int(min(fits)), INITIAL_ACTORS_MAX))
            compute = ray.data.ActorPoolStrategy(min_size=1, max_size=None, initial_size=initial)
        options = dict(fn_constructor_kwargs=kwargs, batch_size=batch_size, batch_format="pyarrow",
                       compute=compute, num_cpus=num_cpus, num_gpus=num_gpus)
        if num_gpus and batch_size is None:
            # map_batches refuses GPUs without a batch size; whole blocks are what we
            # want here (as Ray's own map_groups does).
            return ds.map_batches_internal(udf, **options)
        return ds.map_batches(udf, **options)

    # -- reshaping -------------------------------------------------------------------

    def _fan_in(self, step: str, parents: tuple[str, ...]) -> _Frame:
        """Parents' blocks in ``inputs`` order, conformed to the schema ``concat`` gives."""
        frames = [self.frames[p] for p in parents]
        for frame in frames:
            self._materialize(frame)
        refs = [ref for frame in frames for ref in frame.blocks]
        rows = [n for frame in frames for n in frame.rows]
        schema = fan_in(step, [self._schema_table(p) for p in parents], parents).schema
        return _Frame(blocks=[block_tasks.conform_block.remote(ref, schema) for ref in refs], rows=rows)

    def _regroup(self, frame: _Frame, batch_size: int | None) -> _Frame:
        """Whole qid groups per block, in the local executor's order and batches (a shuffle)."""
        self._materialize(frame)
        if not frame.blocks or not any(frame.rows):
            return _Frame(blocks=frame.blocks, rows=frame.rows, aligned=True)
        schema = pa.unify_schemas(self._schemas(frame), promote_options="permissive")
        if "qid" not in schema.names:  # one call, so the operator reports the missing column
            return self._coalesce(frame)
        regrouped, rows = block_tasks.regroup(frame.blocks, frame.rows, schema.field("qid").type, batch_size)
        return _Frame(blocks=regrouped, rows=rows, aligned=True)

    def _coalesce(self, frame: _Frame) -> _Frame:
        """Everything in one block, for a corpus step."""
        self._materialize(frame)
        if len(frame.blocks) <= 1:
            return _Frame(blocks=frame.blocks, rows=frame.rows, aligned=True)
        return _Frame(blocks=[block_tasks.concat_blocks.remote(*frame.blocks)], rows=[sum(frame.rows)], aligned=True)

    # -- datasets and blocks ---------------------------------------------------------

    def _dataset(self, ds: Any) -> Any:
        """Give a new root dataset its own context: order preserved, no progress bars."""
        ctx = ds.context
        ctx.execution_options.preserve_order = True
        ctx.enable_progress_bars = False
        ctx.enable_operator_progress_bars = False
        ctx.print_on_execution_start = False
        return ds

    def _dataset_of(self, frame: _Frame) -> Any:
        if frame.ds is not None:
            return frame.ds
        return self._dataset(ray.data.from_arrow_refs(list(frame.blocks)))

    def _materialize(self, frame: _Frame) -> None:
        if frame.blocks is not None:
            return
        materialized = frame.ds.materialize()
        blocks, rows, schemas = [], [], []
        for bundle in materialized.iter_internal_ref_bundles():
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
            self.messages.put(("done", step))
        frame.pending = []

    def _collect(self, step: str) -> pa.Table:
        """A step's output as one table, as the local executor concatenates it."""
        frame = self.frames[step]
        self._materialize(frame)
        tables = ray.get(list(frame.blocks))
        # Ray's own empty blocks (no input rows reached the operator) have no columns;
        # the operator's empty outputs have its columns, as in the local executor.
        shaped = [t for t in tables if t.num_rows] or [t for t in tables if t.num_columns]
        return concat(shaped) if shaped else self._empty_output(step)

    def _empty_output(self, step: str) -> pa.Table:
        """What a step returns when its input has no rows (its blocks are none)."""
        if step not in self.empty:
            flow, op = self.flow, self.flow.operators[step]
            if op.scope == "source":
                self.empty[step] = pa.table({})
            else:
                parents = flow.inputs[step]
                if not parents:
                    table = self.flow_input.slice(0, 0)
                else:
                    table = fan_in(step, [self._schema_table(p) for p in parents], parents)
                self.empty[step] = ray.get(block_tasks.empty_output.options(
                    num_cpus=flow.step_option(step, "num_cpus"), num_gpus=self._num_gpus(step),
                ).remote(type(op), op.params.model_dump(), step, tuple(flow.inputs[step]), table))
        return self.empty[step]

    def _schema_table(self, step: str) -> pa.Table:
        """An empty table with a materialised step's columns (as ``concat`` would unify them)."""
        frame = self.frames[step]
        schemas = [schema for schema in self._schemas(frame) if len(schema)] if frame.blocks else []
        if schemas:
            return pa.unify_schemas(schemas, promote_options="permissive").empty_table()
        return self._empty_output(step).slice(0, 0)

    def _schemas(self, frame: _Frame) -> list[pa.Schema]:
        """Each block's schema: from Ray's metadata where it has it, else read by a task."""
        known = frame.schemas or [None] * len(frame.blocks)
        missing = [i for i, schema in enumerate(known) if schema is None]
        fetched = ray.get([block_tasks.schema_of.remote(frame.blocks[i]) for i in missing])
        frame.schemas = list(known)
        for i, schema in zip(missing, fetched):
            frame.schemas[i] = schema
        return frame.schemas


@contextlib.contextmanager
def _quiet_ray_data() -> Iterator[None]:
    """Ray Data's per-execution INFO lines and progress-bar notices off while a run goes.

    Ray Data re-applies its own logging config (``ray.data`` at DEBUG) whenever a
    dataset runs, so the levels are set on the child loggers that write those lines,
    and restored afterwards.
    """
    loggers = {"ray.data._internal.execution.streaming_executor": logging.WARNING,
               "ray.data._internal.progress": logging.ERROR}
    before = {name: logging.getLogger(name).level for name in loggers}
    for name, level in loggers.items():
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < level:
            logger.setLevel(level)
    before.update({name: logging.getLogger(name).level for name in _FAILURE_LOGGERS})
    try:
        yield
    finally:
        for name, level in before.items():
            logging.getLogger(name).setLevel(level)


#: Loggers through which Ray Data reports a failed stage, with its traceback.
_FAILURE_LOGGERS = ("ray.data._internal.execution.streaming_executor_state", "ray.data.exceptions")


def _quiet_failures() -> None:
    """After a cancel the stages fail on purpose: no tracebacks (restored by ``_quiet_ray_data``)."""
    for name in _FAILURE_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL)
