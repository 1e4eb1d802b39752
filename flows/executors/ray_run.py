"""One Ray Data run of a flow: its stages built, as ``map_batches`` over datasets, on a worker thread while the
calling thread follows progress (``ray_progress``), and each step's output collected in the local executor's order.

Why apart from ``ray_data``: the executor there checks a flow and starts Ray; this is what one run does with the
stages ``ray_plan`` decided. The rules it follows are ``ray_data``'s docstring.
"""

from __future__ import annotations

import pickle
import time
from typing import Any

import pyarrow as pa
import ray
import ray.data

from flows.executors import _ray_blocks as block_tasks
from flows.executors import ray_frames as frames
from flows.executors._ray_udfs import SourceUDF, StepUDF, run_as_task
from flows.executors.base import RunState, fan_in
from flows.executors.driver_paths import absolute_paths
from flows.executors.group_order import in_local_order
from flows.executors.ray_env import configure_dataset
from flows.executors.ray_frames import Frame
from flows.executors.ray_llm import llm_engine, vllm_stage
from flows.executors.ray_nodes import warn_when_no_cpu_free
from flows.executors.ray_plan import (
    ClusterResources, Stage, actors_for_blocks, cut_input, input_readers, largest_node_cpus, plan_stages,
    runs_as_tasks, shape_stage, spread_rows, spreads_input, spreads_streamed_input, stage_inputs)
from flows.executors.ray_progress import RunFollower
from flows.result import FlowResult
from flows.spec import Flow
from operators.base import Operator
from operators.tables import concat

class RayRun:
    """One run: the stages, built on a worker thread while the calling thread follows progress."""

    def __init__(self, flow: Flow, state: RunState, flow_input: pa.Table, *, keep_history: bool):
        self.flow = flow
        self.state = state
        self.flow_input = flow_input
        self.keep_history = keep_history
        self.follower = RunFollower(state)
        self.resources = ClusterResources(flow, ray.cluster_resources(), largest_node_cpus(ray.nodes()))
        warn_when_no_cpu_free(cluster=self.resources.cluster)  # a wait for CPUs that would pass without a word
        self.frames: dict[str, Frame] = {}
        self.tables: dict[str, pa.Table] = {}
        self.empty: dict[str, pa.Table] = {}
        self.input: Frame | None = None
        self.stages = plan_stages(flow, state.steps, keep_history=keep_history)
        self.stage_of = {step: stage for stage in self.stages for step in stage}
        self.input_batch_size, self.per_query = input_readers(flow, state.steps)

    def execute(self) -> FlowResult:
        for stage in self.stages:
            if len(stage) > 1:
                self.state.result.timings.add("fused:" + "+".join(stage), 0.0)
        self.follower.follow(self._work, self.flow.name)
        state = self.state
        for step in state.steps:  # steps that streamed, or had no rows
            self.follower.finish(step)
        state.result.steps = {step: state.result.steps[step] for step in state.steps}
        if self.keep_history:
            for step in state.steps:
                state.result.history[step] = self.tables[step]
        return state.finish(self.tables[self.flow.output], self.flow_input)

    # -- the worker thread ----------------------------------------------------------

    def _work(self) -> None:
        flow = self.flow
        consumers = {s: [c for c in flow.consumers[s] if c in self.state.steps] for s in self.state.steps}
        for stage in self.stages:
            step = stage[-1]
            self.follower.current = stage[0]
            self.state.cancel.raise_if_cancelled(stage[0])
            frame = self._run_stage(stage)
            for fused in stage[:-1]:  # never read: only for _empty_output's walk up the chain
                self.frames[fused] = Frame()
            self.frames[step] = frame
            if self.keep_history or len(consumers[step]) > 1 or step == flow.output:
                self._materialize(frame)
        self.follower.current = None
        for step in self.state.steps if self.keep_history else [flow.output]:
            self.tables[step] = self._collect(step)

    def _materialize(self, frame: Frame) -> None:
        self.state.cancel.raise_if_cancelled(self.follower.current)  # a run that ended without this thread: no more
        frames.materialize(frame, lambda step: self.follower.messages.put(("done", step)))

    def _time(self, name: str, started: float) -> None:
        self.follower.messages.put(("time", name, time.perf_counter() - started))

    def _run_stage(self, stage: Stage) -> Frame:
        flow, step = self.flow, stage[0]
        op = flow.operators[step]
        if op.scope == "source":
            return self._read_source(stage, op)
        source = self._source_of(step)
        shape = shape_stage(flow, stage, aligned=source.aligned, one_row_per_qid=source.one_row_per_qid)
        if shape.regroup:
            started = time.perf_counter()
            self._materialize(source)
            source = frames.regroup(source, flow.step_option(step, "batch_size"))
            self._time(f"regroup:{step}", started)
        elif shape.coalesce:
            self._materialize(source)
            source = frames.coalesce(source)
        if source.empty:  # nothing to run on
            return Frame(blocks=[], rows=[], aligned=True)
        vllm = len(stage) == 1 and llm_engine(op, self.resources.num_gpus(step)) == "vllm"
        spread = not vllm and spreads_input(flow, stage)
        if spread:
            source = self._spread(source, stage)
        if source.ds is not None and not self.resources.fits(
                [self.stage_of.get(s, (s,)) for s in source.pending] + [stage]):
            # Streamed stages hold their actors together: if the cluster cannot hold one
            # actor of each, a stage could wait for ever on one that waits for it.
            self._materialize(source)
        # A stage streamed after another starts with one actor; one over materialised
        # blocks with as many as the cluster, the blocks and the rows warrant.
        # An actor per block for a query step on the flow input or a model step's cut input: work outweighs a start.
        inputs = 1 if source.ds is not None else (
            len(source.rows) if spread or (source is self.input and self.per_query) else actors_for_blocks(source.rows))
        pending = (source.pending if source.ds is not None else []) + list(stage)
        if vllm:  # rows come back in any order
            ds = vllm_stage(frames.dataset_of(source), op, concurrency=self.resources.of_stage(stage)[0] or 1)
            return Frame(ds=ds, aligned=False, pending=pending)
        kwargs = {**self._udf_kwargs(stage, op), "cache": self.state.step_cache(step),
                  "batch_size": flow.step_option(step, "batch_size") or None}
        # A spread input goes whole blocks to the actors (a batch size would have Ray bundle them up to it), one at a
        # time to a pool that starts whole: a fixed one, or one over the cut input (``_map``).
        whole = source.ds is None or bool(self.resources.of_stage(stage)[0])
        ds = self._map(frames.dataset_of(source), stage, StepUDF, kwargs, None if spread else shape.batch_size,
                       inputs=inputs, one_at_a_time=spread and whole)
        return Frame(ds=ds, aligned=shape.out_aligned, pending=pending)

    def _spread(self, source: Frame, stage: Stage) -> Frame:
        """A model step's input, materialised and cut so that every actor of its pool gets blocks
        (``ray_plan.spread_rows``); the cut shows as a ``spread:<step>`` timing. A pool of one, or a few queries
        streaming from the steps before (``ray_plan.spreads_streamed_input``), stream in as before."""
        actors = self.resources.pool_size(stage)
        if actors < 2 or (source.ds is not None and not spreads_streamed_input(self.state.input_rows or 0)):
            return source
        self._materialize(source)
        most = spread_rows(source.rows, actors, self.flow.step_option(stage[0], "batch_size"))
        if most is None:
            return source
        started = time.perf_counter()
        spread = frames.spread(source, most)
        self._time(f"spread:{stage[0]}", started)
        return spread

    def _source_of(self, step: str) -> Frame:
        parents = self.flow.inputs[step]
        if not parents:
            return self._input_frame()
        if len(parents) == 1:
            return self.frames[parents[0]]
        for parent in parents:
            self._materialize(self.frames[parent])
        return frames.union(step, [self.frames[p] for p in parents], parents,
                            [self._schema_table(p) for p in parents])

    def _input_frame(self) -> Frame:
        """The flow input, cut into blocks for parallelism, at qid boundaries where it can."""
        if self.input is None:
            table = self.flow_input
            cut = cut_input(table, int(self.resources.cpus), self.input_batch_size, per_query=self.per_query)
            pieces = cut.pieces(table)
            self.input = Frame(blocks=[ray.put(piece) for piece in pieces], rows=[p.num_rows for p in pieces],
                               aligned=cut.aligned, one_row_per_qid=cut.one_row_per_qid,
                               schemas=[table.schema] * len(pieces))
        return self.input

    def _read_source(self, stage: Stage, op: Operator) -> Frame:
        params = op.params.model_dump()
        if (shipped := _shipped(op, params)) is not params:  # splits name its files as the workers find them
            op = type(op)(shipped, step_id=op.step_id, input_steps=op.input_steps)
        op.ensure_setup()  # as the local executor does, for splits()
        splits = op.splits()
        if not splits:
            return Frame(blocks=[], rows=[])
        try:
            pickle.dumps(splits)
            shipped: list[Any] | None = splits
        except Exception:  # recomputed by each actor
            shipped = None
        kwargs = {**self._udf_kwargs(stage, op), "splits": shipped}
        ds = configure_dataset(ray.data.from_items([{"split_index": i} for i in range(len(splits))]))
        return Frame(ds=self._map(ds, stage, SourceUDF, kwargs, 1, inputs=len(splits), tasks=shipped is not None),
                     pending=list(stage))

    def _udf_kwargs(self, stage: Stage, op: Operator) -> dict[str, Any]:
        """The callable's arguments: the stage's first step, then the row steps fused after it."""
        flow, step = self.flow, stage[0]
        inside = stage_inputs(flow, stage)
        rows = [{"op_class": type(flow.operators[s]), "params": _shipped(flow.operators[s]),
                 "step_id": s, "input_steps": tuple(flow.inputs[s]), "cache": self.state.step_cache(s),
                 "batch_size": flow.step_option(s, "batch_size") or None, "reads": inside[s]} for s in stage[1:]]
        return {"op_class": type(op), "params": _shipped(op), "step_id": step,
                "input_steps": tuple(flow.inputs[step]), "reporter": self.follower.reporter,
                "run": self.follower.run_id, "flow": flow.name, "rows": rows}

    def _map(self, ds: Any, stage: Stage, udf: type, kwargs: dict[str, Any], batch_size: int | None, *,
             inputs: int, tasks: bool = True, one_at_a_time: bool = False) -> Any:
        """``ds`` through the stage's callable: as tasks where ``runs_as_tasks`` allows (and ``tasks``: a
        source whose splits cannot travel computes them once per actor instead), else on an actor pool, whose
        actors take one block at a time with ``one_at_a_time`` (Ray's advice for balancing long tasks: by default it
        queues blocks on an actor, which an idle actor that started later could have run), a pool of a fixed size: an
        actor with one block is 100% busy to Ray Data, which adds actors at 175%; else a pool that grows."""
        concurrency, num_cpus, num_gpus = self.resources.of_stage(stage)
        num_gpus = num_gpus or None
        if num_gpus and num_cpus == 1:  # Ray Data reserves it itself, and warns "experimental" when both are named
            num_cpus = None
        if tasks and runs_as_tasks(self.flow, stage):
            return ds.map_batches(run_as_task, fn_kwargs={"udf": udf, "kwargs": kwargs}, batch_size=batch_size,
                                  batch_format="pyarrow", num_cpus=num_cpus)
        if size := concurrency or (self.resources.initial_actors(stage, inputs) if one_at_a_time else 0):
            compute = ray.data.ActorPoolStrategy(size=size, max_tasks_in_flight_per_actor=1 if one_at_a_time else None)
        else:
            compute = ray.data.ActorPoolStrategy(min_size=1, max_size=None,
                                                 initial_size=self.resources.initial_actors(stage, inputs))
        options = dict(fn_constructor_kwargs=kwargs, batch_size=batch_size, batch_format="pyarrow",
                       compute=compute, num_cpus=num_cpus, num_gpus=num_gpus)
        if num_gpus and batch_size is None:
            # map_batches refuses GPUs without a batch size; whole blocks are what we want here.
            return ds.map_batches_internal(udf, **options)
        return ds.map_batches(udf, **options)

    # -- outputs ---------------------------------------------------------------------

    def _collect(self, step: str) -> pa.Table:
        """A step's output as one table, as the local executor concatenates it."""
        frame = self.frames[step]
        self._materialize(frame)
        tables = ray.get(list(frame.blocks))
        # Ray's own empty blocks (no input rows reached the operator) have no columns;
        # the operator's empty outputs have its columns, as in the local executor.
        shaped = [t for t in tables if t.num_rows] or [t for t in tables if t.num_columns]
        return in_local_order(concat(shaped)) if shaped else self._empty_output(step)

    def _schema_table(self, step: str) -> pa.Table:
        """An empty table with a materialised step's columns."""
        table = frames.schema_table(self.frames[step])
        return table if table is not None else self._empty_output(step).slice(0, 0)

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
                    num_cpus=self.resources.num_cpus(step), num_gpus=self.resources.num_gpus(step),
                ).remote(type(op), op.params.model_dump(), step, tuple(flow.inputs[step]), table))
        return self.empty[step]


def _shipped(op: Operator, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """A step's params (``params``: dumped already) as its Ray workers get them: relative paths resolved here
    (``driver_paths``); ``params`` itself when none is."""
    return absolute_paths(type(op), op.params.model_dump() if params is None else params)
