"""What the Ray Data executor runs on the workers: the stage callables (the reporter they report to is
``ray_reporter``'s; their output's query groups kept whole, ``group_order``'s).

A stage runs one step, or a *fused chain*: a step (a source or a row step) followed by
row steps that each read only the one before, or a *fused fan-in*: query steps that read
the stage's input and the fan-in that joins them. ``StepUDF`` and ``SourceUDF`` hold one
``StepRunner`` per step and pass each batch through them in order, reporting each step's
``BatchStats`` as a stage of its own would (see ``ray_data``).
"""

from __future__ import annotations

import time
from typing import Any, Iterator

import pyarrow as pa
import ray

from flows.cache import StepCache
from flows.executors import ray_metrics
from flows.executors.base import fan_in, scope_batches
# in_local_order and shared_reporter re-exported: they lived here before ``group_order`` and ``ray_reporter``
from flows.executors.group_order import in_local_order, whole_group_pieces, with_branch_order  # noqa: F401
from flows.executors.ray_reporter import shared_reporter  # noqa: F401
from flows.executors.ray_warnings import carried
from flows.runner import BatchStats, StepRunner
from operators.base import Operator
from operators.errors import FlowCancelled, TesseraError
from operators.imported_code import remember_source
from operators.interrupt import interruptible
from operators.models.repository import ObjectRepository
from operators.tables import concat

#: A callable asks the reporter before a batch only if it has not heard from it for this long.
CHECK_SECONDS = 0.1


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
                yield from whole_group_pieces(self._fan_in(batch))
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
                    yield from whole_group_pieces(table)
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
        return with_branch_order(outputs[step], [outputs[p] for p in self.reads[-1]])


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
                batches = self.op.read_checked(self.splits[index])
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


def run_as_task(batch: pa.Table, *, udf: type[StepUDF], kwargs: dict[str, Any]) -> Iterator[pa.Table]:
    """A stage as a Ray task: its callable is built for each block and dropped after it; its operators come
    set up from this process's earlier tasks (``_make_op``)."""
    yield from udf(**kwargs)(batch)
