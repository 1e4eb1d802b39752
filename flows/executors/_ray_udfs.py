"""What the Ray Data executor runs on the workers: the reporter and the stage callables.

A stage runs one step, or a *fused chain*: a step (a source or a row step) followed by
row steps that each read only the one before, or a *fused fan-in*: query steps that read
the stage's input and the fan-in that joins them. ``StepUDF`` and ``SourceUDF`` hold one
``StepRunner`` per step and pass each batch through them in order, reporting each step's
``BatchStats`` as a stage of its own would (see ``ray_data``).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from flows.cache import StepCache
from flows.executors import ray_metrics
from flows.executors.base import fan_in, scope_batches
from flows.executors.ray_warnings import carried
from flows.runner import BatchStats, StepRunner
from operators.base import Operator
from operators.errors import FlowCancelled, TesseraError
from operators.interrupt import interruptible
from operators.models.repository import ObjectRepository
from operators.imported_code import remember_source
from operators.tables import concat

#: Largest piece a callable yields (Ray slices a yielded table above half a block,
#: 64 MiB by default, where it could split a qid).
PIECE_BYTES = 16 * 1024 * 1024
#: Column a fused fan-in adds for its rows' order across blocks (``_with_branch_order``); never seen by operators.
ORDER_COLUMN = "__tessera_branch"
#: A callable asks the reporter before a batch only if it has not heard from it for this long.
CHECK_SECONDS = 0.1


#: The reporter's name: one per Ray job (a named actor that is not detached ends with its driver).
REPORTER_NAME = "tessera-run-reporter"


@ray.remote(num_cpus=0)
class _Reporter:
    """Collects batch statistics from the callables and holds each run's cancel flag and first error.

    One actor serves every run of a driver (keyed by run id), so a run does not wait for an actor
    process to start, which costs more than a small flow's own work (docs/results.md).
    """

    def __init__(self) -> None:
        self._events: dict[str, list[tuple[str, str, Any]]] = {}  # open runs only
        self._cancelled: set[str] = set()
        self._errors: dict[str, tuple] = {}

    def open(self, run: str) -> None:
        """Start keeping the run's records; a record for a run not open (closed, or never opened)
        is dropped, so a batch that reports after its run ended leaves nothing behind."""
        self._events.setdefault(run, [])

    def report(self, run: str, step: str, stats: BatchStats) -> bool:
        """Keep a batch's statistics; True when the batch should stop (its run was cancelled or ended)."""
        events = self._events.get(run)
        if events is None:
            return True
        events.append(("batch", step, stats))
        return run in self._cancelled

    def started(self, run: str, step: str) -> None:
        """A worker began the step's first batch (a run not open: dropped): a cancel while it runs names it."""
        self._events.get(run, []).append(("start", step, None))

    def cancelled(self, run: str) -> bool:
        return run in self._cancelled or run not in self._events

    def failed(self, run: str, error: tuple, node: tuple[str, str] | None = None) -> None:
        """Keep the run's first error; raised on a node other than this one (the driver's), its message says
        which (``node``: its id and IP)."""
        if run in self._events and run not in self._errors:
            if node is not None and node[0] != ray.get_runtime_context().get_node_id() \
                    and error[0] is not FlowCancelled:
                cls, message, *where = error
                error = (cls, f"{message} (on the Ray node at {node[1]}, id {node[0][:8]}, not the driver's node: "
                              "it reads its own TESSERA_HOME, models and paths)", *where)
            self._errors[run] = error

    def error(self, run: str) -> tuple | None:
        return self._errors.get(run)

    def cancel(self, run: str) -> None:
        if run in self._events:
            self._cancelled.add(run)

    def drain(self, run: str) -> list[tuple[str, str, Any]]:
        """The records since the last drain (the run stays open)."""
        events = self._events.get(run) or []
        if events:
            self._events[run] = []
        return events

    def close(self, run: str) -> None:
        """Forget the run (its last events were drained)."""
        self._events.pop(run, None)
        self._cancelled.discard(run)
        self._errors.pop(run, None)


_shared: dict[tuple[str, str], Any] = {}  # (node, job) -> the reporter's handle, held so it lives as long as the driver
_shared_lock = threading.Lock()


def shared_reporter() -> Any:
    """The driver's reporter, created on its first run (again after ``ray.shutdown()`` and a new ``ray.init()``),
    on the driver's node. Keyed by the driver's node and job: a new local Ray's first job has the id of the last
    one's (01000000), so the job alone kept the dead handle of the Ray that ``ray.shutdown()`` ended."""
    context = ray.get_runtime_context()
    job = (context.get_node_id(), context.get_job_id())
    with _shared_lock:
        if job not in _shared:
            _shared.clear()  # handles of an earlier Ray session are dead
            # On the driver's node: a worker node that dies must not take every run's reporter with it.
            here = NodeAffinitySchedulingStrategy(context.get_node_id(), soft=False)
            _shared[job] = _Reporter.options(name=REPORTER_NAME, get_if_exists=True, scheduling_strategy=here).remote()
        return _shared[job]


#: The set-up operators of this worker process, by class, params and step: a task builds its callable anew
#: for each block, and these come back set up (a model, an index, a stemmer) instead of loading again, for
#: the rest of the run and the driver's later runs (a Ray worker serves one driver). Models and indices are
#: shared per process (``operators.models.repository``, ``shared_index``), so a kept operator holds no copy.
_kept_operators = ObjectRepository()
KEPT_OPERATORS_MAX = 64


def _make_op(op_class: type[Operator], params: dict[str, Any], step_id: str,
             input_steps: tuple[str, ...]) -> Operator:
    # The class travels pickled by reference (its module is imported here), so
    # this is what ``operators.registry.create`` does once it has found the class,
    # and it also works for operators that are not in the registry (plugins, tests).
    inputs = tuple(input_steps)
    remember_source(op_class)  # a plugin's: the file this worker imported, for its key
    if len(_kept_operators) >= KEPT_OPERATORS_MAX:
        _kept_operators.clear()
    op = _kept_operators.get_or_create(f"{op_class.__module__}.{op_class.__qualname__}",
                                       {"params": params, "step_id": step_id, "input_steps": inputs},
                                       lambda: op_class(params, step_id=step_id, input_steps=inputs))
    op.drain_metadata()  # nothing left over from a batch that failed before handing it over
    op.drain_usage()
    return op


class _Callable:
    """What the step and source callables share: the fused row steps, reporting, cancellation.

    ``rows`` describes the steps that follow the stage's own step in the same callable
    (empty when nothing is fused): dicts of ``_make_op``'s arguments plus ``cache``,
    ``batch_size`` and ``reads``, the steps of this stage whose outputs it reads (none: the
    stage's input). A chain's steps each read the one before and run batch by batch.
    """

    def __init__(self, *, reporter: Any, run: str, flow: str = "", rows: list[dict[str, Any]] = ()) -> None:
        self.reporter, self.run, self.flow = reporter, run, flow
        self.cancelled, self.asked, self.started = False, 0.0, set()
        self.chain: list[tuple[StepRunner, int | None]] = []
        self.reads: list[tuple[str, ...]] = []
        for spec in rows:
            spec = dict(spec)
            cache, batch_size = spec.pop("cache"), spec.pop("batch_size")
            self.reads.append(tuple(spec.pop("reads", ())))
            self.chain.append((self._runner(_make_op(**spec), cache), batch_size))
        self.op_names = {runner.op.step_id: runner.op.name for runner, _ in self.chain}

    def _then(self, table: pa.Table, k: int = 0) -> Iterator[pa.Table]:
        """``table`` through the fused row steps from the ``k``-th on, batch by batch."""
        if k == len(self.chain):
            yield table
            return
        runner, batch_size = self.chain[k]
        for part in scope_batches(runner.op, table, batch_size):
            out, stats = self._run(runner, part)
            self._report(runner.op.step_id, stats)
            yield from self._then(out, k + 1)

    def _run(self, runner: StepRunner, batch: pa.Table) -> tuple[pa.Table, BatchStats]:
        """One batch through ``runner``, checking for a cancel before it and between its model batches. An error
        raised below the step (a model this node cannot find) is named after it, as the driver's checks name it."""
        step = runner.op.step_id
        self._check(step)
        if step not in self.started:
            self.started.add(step)
            self.reporter.started.remote(self.run, step)  # not waited for
        try:
            with interruptible(lambda: self._check(step)):  # its warnings said by the driver (ray_warnings)
                return carried(runner.run, batch)
        except TesseraError as err:
            _named(err, runner.op)
            raise

    def _check(self, step: str) -> None:
        """Before a batch: stop if the run was cancelled (asked afresh unless just told)."""
        if not self.cancelled and time.monotonic() - self.asked > CHECK_SECONDS:
            self.cancelled = ray.get(self.reporter.cancelled.remote(self.run))
            self.asked = time.monotonic()
        if self.cancelled:
            raise FlowCancelled("cancelled", step=step)

    def _report(self, step: str, stats: BatchStats) -> None:
        """After a batch: hand over its statistics (before its rows leave), record them as Ray metrics, and
        learn of a cancel."""
        ray_metrics.record_batch(self.flow, step, self.op_names.get(step, ""), stats)
        self.cancelled = ray.get(self.reporter.report.remote(self.run, step, stats))
        self.asked = time.monotonic()
        if self.cancelled:
            raise FlowCancelled("cancelled", step=step)

    def _runner(self, op: Operator, cache: StepCache | None) -> StepRunner:
        """``StepRunner(op, cache)``, whose cache key reads the files of the step's model here (their fingerprint): a
        model this node lacks fails here, before any batch, and is handed to the driver as a batch's error is."""
        try:
            return StepRunner(op, cache)
        except TesseraError as err:
            self._forward(_named(err, op), op.step_id)
            raise

    def _forward(self, err: TesseraError, step: str) -> None:
        """Hand the operator's error (or the cancel, with the step it stopped) to the driver whole: Ray
        passes on only its text. ``step``: the stage's own, for an error that names none. The node goes with it:
        raised on another node than the driver's, a missing model or index is that node's (its own
        ``TESSERA_HOME`` and disks), which the driver's checks found."""
        context = ray.get_runtime_context()
        here = (context.get_node_id(), ray.util.get_node_ip_address())
        step = err.step or step
        ray.get(self.reporter.failed.remote(self.run, (type(err), err.message, step,
                                                       err.op or getattr(self, "op_names", {}).get(step),
                                                       err.field), here))


class StepUDF(_Callable):
    """One step (then its fused row steps) on one block or batch: ``StepRunner.run`` per batch, reported. Public:
    ``ray_data`` maps a row or query stage's blocks with it (Ray Data's log names the stage's tasks after it)."""

    def __init__(self, *, op_class: type[Operator], params: dict[str, Any], step_id: str,
                 input_steps: tuple[str, ...], cache: StepCache | None, batch_size: int | None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.op = _make_op(op_class, params, step_id, input_steps)
        self.step = step_id
        self.op_names[step_id] = self.op.name
        self.runner = self._runner(self.op, cache)
        self.batch_size = batch_size
        steps = [step_id] + [runner.op.step_id for runner, _ in self.chain]
        # a fused fan-in, where some step reads other than the step just before it (a chain never does)
        self.fans_in = any(reads != (before,) for reads, before in zip(self.reads, steps))

    def __call__(self, batch: pa.Table) -> Iterator[pa.Table]:
        try:
            if self.fans_in:
                yield from _whole_group_pieces(self._fan_in(batch))
                return
            if batch.num_rows == 0:
                out = self.runner.run(batch)[0]
                for runner, _ in self.chain:
                    out = runner.run(out)[0]
                yield out
                return
            # Ray already hands row steps batches of at most batch_size rows; a query step
            # gets a whole block of whole groups and a corpus step everything: cut them
            # exactly as the local executor does. Each batch's output is yielded on its
            # own: Ray cuts output blocks between yields, so groups stay whole.
            for part in scope_batches(self.op, batch, self.batch_size):
                out, stats = self._run(self.runner, part)
                self._report(self.step, stats)
                for table in self._then(out):
                    yield from _whole_group_pieces(table)
        except TesseraError as err:
            self._forward(err, self.step)
            raise

    def _fan_in(self, batch: pa.Table) -> pa.Table:
        """A fused fan-in over one block of whole queries: each step over its whole input, in the local
        executor's batches; a step reads the block, or the union of the outputs it names."""
        outputs: dict[str, pa.Table] = {}
        for (runner, batch_size), reads in zip([(self.runner, self.batch_size), *self.chain], [(), *self.reads]):
            step = runner.op.step_id
            table = fan_in(step, [outputs[p] for p in reads], reads) if reads else batch
            parts = []
            for part in scope_batches(runner.op, table, batch_size):
                out, stats = self._run(runner, part)
                self._report(step, stats)
                parts.append(out)
            outputs[step] = concat(parts) if parts else runner.run(table.slice(0, 0))[0]
        return _with_branch_order(outputs[step], [outputs[p] for p in self.reads[-1]])


class SourceUDF(_Callable):
    """Reads the splits whose indices it is given, batch by batch (then its fused row steps). Public: ``ray_data``
    maps a source stage's split indices with it."""

    def __init__(self, *, op_class: type[Operator], params: dict[str, Any], step_id: str,
                 input_steps: tuple[str, ...], splits: list[Any] | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.op = _make_op(op_class, params, step_id, input_steps)
        self.step = step_id
        self.op_names[step_id] = self.op.name
        try:  # a source reads its files here: one this node lacks is the step's error, as in a batch
            self.op.ensure_setup()
            self.splits = splits if splits is not None else self.op.splits()
        except TesseraError as err:
            self._forward(_named(err, self.op), step_id)
            raise

    def __call__(self, batch: pa.Table) -> Iterator[pa.Table]:
        try:
            for index in batch.column("split_index").to_pylist():
                batches = self.op.read(self.splits[index])
                while True:
                    self._check(self.step)
                    start = time.perf_counter()
                    table = next(batches, None)
                    if table is None:
                        break
                    self._report(self.step, BatchStats(rows_out=table.num_rows,
                                                       seconds=time.perf_counter() - start,
                                                       metadata=self.op.drain_metadata(),
                                                       usage=self.op.drain_usage()))
                    yield from self._then(table)
        except TesseraError as err:
            self._forward(err, self.step)
            raise


def _named(err: TesseraError, op: Operator) -> TesseraError:
    """``err`` named after ``op``'s step when it names none: raised below the step (a model's or an index's loading),
    it would reach the driver without saying which step failed."""
    if err.step is None:
        err.step, err.op = op.step_id, err.op or op.name
    return err


def _with_branch_order(out: pa.Table, branches: list[pa.Table]) -> pa.Table:
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


def run_as_task(batch: pa.Table, *, udf: type[StepUDF], kwargs: dict[str, Any]) -> Iterator[pa.Table]:
    """A stage as a Ray task: its callable is built for each block and dropped after it; its operators come
    set up from this process's earlier tasks (``_make_op``)."""
    yield from udf(**kwargs)(batch)


def _whole_group_pieces(table: pa.Table, max_bytes: int | None = None) -> Iterator[pa.Table]:
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
