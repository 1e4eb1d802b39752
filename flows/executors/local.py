"""The local executor: runs a flow in-process on pyarrow tables (tests, one online query)."""

from __future__ import annotations

import time
from typing import Iterable

import pyarrow as pa

from flows.cache import StepCache
from flows.executors.base import RunState, as_flow, as_queries, fan_in, scope_batches, step_output
from flows.model_check import check_env
from flows.progress import CancelToken, ProgressCallback
from flows.result import FlowResult
from flows.runner import BatchStats, StepRunner, placed_operator
from flows.spec import Flow, FlowSpec
from operators.base import Operator
from operators.errors import TesseraError
from operators.interrupt import interruptible
from operators.tables import concat


class LocalExecutor:
    """Runs steps one after another in this process, batch by batch.

    Progress is reported after every batch and the cancellation token is checked
    between batches. History keeps each step's output table by reference.
    """

    name = "local"

    def __init__(self, *, cache: StepCache | None = None, keep_history: bool = True):
        self.cache = cache
        self.keep_history = keep_history

    def start(self, *, warm: bool = False) -> None:
        """Nothing to start: steps run in this process."""

    def run(
        self,
        flow: Flow | FlowSpec | str,
        queries: pa.Table | str | Iterable[str] | None = None,
        *,
        progress: ProgressCallback | None = None,
        cancel: CancelToken | None = None,
    ) -> FlowResult:
        flow = as_flow(flow)
        check_env(flow)  # a step's unset key, before the steps in front of it run
        state = RunState(flow, self.name, cache=self.cache, progress=progress, cancel=cancel)
        outputs: dict[str, pa.Table] = {}
        flow_input = as_queries(queries)
        flow.check_input(flow_input.column_names)  # columns no step brings, filters the index cannot take
        # a step placed on a deployment that is not there: said before the steps in front of it run
        placed = {s: placed_operator(flow.operators[s], flow.spec.steps[s].placement) for s in state.steps}
        remaining = {s: sum(1 for c in flow.consumers[s] if c in state.steps) for s in state.steps}
        for step in state.steps:
            state.cancel.raise_if_cancelled(step)
            parents = flow.inputs[step]
            table = fan_in(step, [outputs[p] for p in parents], parents) if parents else flow_input
            outputs[step] = self._run_step(placed[step], step, table, state, flow.step_option(step, "batch_size"))
            state.finish_step(step, outputs[step], self.keep_history)
            if not self.keep_history:  # free what no later step reads
                for p in parents:
                    remaining[p] -= 1
                    if remaining[p] == 0 and p != flow.output:
                        outputs.pop(p, None)
        return state.finish(outputs[flow.output], flow_input)

    def _run_step(self, op: Operator, step: str, table: pa.Table, state: RunState,
                  batch_size: int | None) -> pa.Table:
        state.start_step(step, rows_total=None if op.scope == "source" else table.num_rows)
        if op.scope == "source":
            op.ensure_setup()
            return self._read_source(op, step, state)
        # Other operators set up on their first call: a step served wholly from the
        # cache never loads its model.
        runner = StepRunner(op, state.step_cache(step))
        parts = []
        try:
            for batch in scope_batches(op, table, batch_size):
                state.cancel.raise_if_cancelled(step)
                with interruptible(lambda: state.cancel.raise_if_cancelled(step)):  # also between model batches
                    out, stats = runner.run(batch)
                parts.append(out)
                state.add_batch(step, stats)
        except TesseraError as err:  # raised around the operator (its rows cut per query): named as its own are
            if err.step is None:
                err.step, err.op = step, op.name
            raise
        return step_output(step, op.name, parts) if parts else runner.run(table.slice(0, 0))[0]

    def _read_source(self, op: Operator, step: str, state: RunState) -> pa.Table:
        parts = []
        for split in op.splits():
            batches = op.read_checked(split)
            while True:
                state.cancel.raise_if_cancelled(step)
                start = time.perf_counter()
                with op.recording() as notes:  # this run's records, not another thread's run of the same flow
                    batch = next(batches, None)
                if batch is not None:
                    parts.append(batch)
                if batch is not None or notes.metadata or notes.usage:  # (what the end of a read recorded too)
                    state.add_batch(step, BatchStats(rows_out=0 if batch is None else batch.num_rows,
                                                     seconds=time.perf_counter() - start,
                                                     metadata=notes.drain_metadata(), usage=notes.drain_usage()))
                if batch is None:
                    break
        return concat(parts)
