"""How a flow becomes Ray Data stages: fusion, alignment, input blocks and resources. No Ray in here.

Everything the Ray Data executor decides before it builds a dataset is a pure function
of the flow, the cluster's resources and block sizes, so it is tested without Ray.

Stages and fusion (``plan_stages``)
    Each step is a stage, except that with ``keep_history=False`` a row step whose only
    input is a row step or a source, read by nothing else and not the output, with the
    same ``num_gpus``, runs in its parent's stage: a chain such as source -> row -> row is
    one ``map_batches``. An output fan-in without a model of its own (``fuse.rrf``) whose branches
    are query steps that read the same input and nothing else reads runs with them in one
    stage (``hybrid``'s bm25 + dense + fused): each block of queries goes through every
    branch and the fusion in one call, so the branches' rows never cross the object store
    and need no regroup. The stage takes its first step's ``concurrency`` and the largest
    ``num_cpus``.

Tasks or actors (``runs_as_tasks``)
    A stage that asks for no ``concurrency`` and no GPU runs as Ray tasks on workers that are
    already up, and each worker process keeps the operators it has set up (a model, an index)
    for its later blocks and the driver's later runs; a stage with a ``concurrency`` or a GPU
    gets an actor pool, whose actors load their model once each and end with the run. An
    actor pool costs a worker process and its imports per stage and run (docs/results.md has
    the figures).

Alignment (``shape_stage``)
    A query-scope step must see whole qid groups. A dataset is *aligned* when every
    qid's rows lie in one block. The flow input cut between qid runs is aligned; so is
    the output of a query or corpus step (its callable yields whole groups); the output
    of a row step is aligned only when its batches cannot split a qid (its input had one
    row per qid, or it ran on whole blocks of an aligned input). A fan-in or a source is
    not. A query step over a dataset that is not aligned is *regrouped* first (a
    shuffle in the local executor's group order and batches); a corpus step's input is
    coalesced into one block.

Resources (``ClusterResources``)
    Streamed stages hold their actors at the same time; when a chain of them needs more
    CPUs (or GPUs) than the cluster has for one actor each, the executor materialises
    before adding the next stage (``fits``), since otherwise an actor of a later stage
    could hold the CPU an earlier one waits for. A ``num_gpus`` hint above the cluster's
    GPUs is dropped with a warning: the step runs on CPUs, as it does locally. A ``num_cpus``
    hint above the CPUs of the cluster's largest node is capped there with a warning: Ray
    never places a task that asks for more, and the run waited for ever.

Spreading a model step (``spreads_input``, ``spread_rows``)
    An actor pool gives each block to one actor, and a retriever writes one block per 256
    queries, so an LLM step over fewer queries kept one actor of its pool busy and the
    others idle; a source writes blocks of up to 128 MiB, so 300,000 passages reached two
    of four GPU embedders. The input of an actor-pool stage whose step calls a language
    model or asks for GPUs (a row or query step: a corpus step gets everything in one
    call) is materialised and cut (at qid boundaries where it is aligned) into blocks of at
    most its batch size, at least one per actor and at most ``SPREAD_BLOCKS_MAX`` (or one
    per actor if more); each actor takes one block at a time. The cut's tasks take
    milliseconds; waiting for the steps before it (they no longer stream into the step, and
    its actors start after them) costs seconds, so an input still streaming is cut only for
    ``SPREAD_MIN_QUERIES`` queries or more.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from flows.executors.base import query_batch_ends
from flows.spec import Flow
from operators.base import Operator

log = logging.getLogger(__name__)

#: The flow input is cut into blocks of at least this many rows, at most this many per CPU.
INPUT_BLOCK_ROWS = 4096
INPUT_BLOCKS_PER_CPU = 2
#: Actors an autoscaling pool starts with at most, and a GPU step's pool without a ``concurrency`` holds
#: (``pool_size``); and rows of materialised input per actor it starts with (an actor costs a process start).
INITIAL_ACTORS_MAX = 8
INITIAL_ROWS_PER_ACTOR = 16384
#: The most blocks a model step's input is cut into (unless its pool has more actors).
SPREAD_BLOCKS_MAX = 64
#: Fewer queries than this stream into a model step uncut: waiting for the steps before it would cost more than
#: its few calls gain on a second actor (docs/results.md).
SPREAD_MIN_QUERIES = 16

Stage = tuple[str, ...]


def runs_as_tasks(flow: Flow, stage: Stage) -> bool:
    """Whether a stage runs as Ray tasks rather than on an actor pool: it asks for no ``concurrency``
    (a number of actors: an LLM step's bound on calls in flight) and no GPU (a GPU task's worker
    exits after each task, so it would load its model again for every block)."""
    return not flow.step_option(stage[0], "concurrency") and not flow.step_option(stage[0], "num_gpus")


def spreads_input(flow: Flow, stage: Stage) -> bool:
    """Whether a stage's input is spread over its actors (module docstring): it runs on an actor pool, is no corpus
    step (one call), and its step calls a language model (``Operator.calls_model``, also an operator it runs inside
    itself) or asks for GPUs (a source's one big block kept 2 of 4 GPU embedders busy, docs/results.md)."""
    step = stage[0]
    op = flow.operators[step]
    heavy = bool(flow.step_option(step, "num_gpus")) or any(o.calls_model() for _, o in op.walk())
    return not runs_as_tasks(flow, stage) and op.scope != "corpus" and heavy


def spread_rows(rows: list[int], actors: int, batch_size: int | None) -> int | None:
    """The most rows a block of a model step's input should hold, so that each of ``actors`` gets work: blocks of at
    most ``batch_size`` rows, at least ``actors`` of them, at most ``max(SPREAD_BLOCKS_MAX, actors)``; None when
    the blocks are that small already (or one actor takes everything anyway)."""
    total = sum(rows)
    if actors < 2 or total < 2:
        return None
    blocks = -(-total // batch_size) if batch_size else actors
    blocks = min(max(blocks, actors), max(SPREAD_BLOCKS_MAX, actors))
    most = -(-total // blocks)
    return most if max(rows) > most else None


def spreads_streamed_input(input_rows: int) -> bool:
    """Whether a model step's input that is still streaming from the steps before it is materialised to be cut:
    for ``SPREAD_MIN_QUERIES`` queries or more, or a flow that reads no queries (it starts at a source)."""
    return input_rows == 0 or input_rows >= SPREAD_MIN_QUERIES


def plan_stages(flow: Flow, steps: list[str], *, keep_history: bool) -> list[Stage]:
    """The stages, in run order: one step each, a fused chain of row steps, or a fused fan-in (module docstring)."""
    consumers = {s: [c for c in flow.consumers[s] if c in steps] for s in steps}
    stages: list[Stage] = []
    stage_of: dict[str, Stage] = {}
    for step in steps:
        parents = flow.inputs[step]
        if not keep_history and _fuses_fan_in(flow, step, consumers, stages):
            index = stages.index((parents[0],))
            stages[index] = stage = (*parents, step)
            for branch in parents[1:]:
                stages.remove((branch,))
            for member in stage:
                stage_of[member] = stage
            continue
        parent = parents[0] if len(parents) == 1 else None
        stage = stage_of.get(parent)
        if (not keep_history and stage is not None and stage[-1] == parent
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
    return stages


def _fuses_fan_in(flow: Flow, step: str, consumers: dict[str, list[str]], stages: list[Stage]) -> bool:
    """Whether ``step`` is a fan-in that runs in one stage with its branches: it is the flow's output (its
    collected rows are put in the local order there), it loads no model, and its branches are query steps, each a
    stage of its own so far, that read the same input, feed only this step and ask for no GPU, no ``concurrency``
    and no batch size of their own beyond the first's."""
    parents = flow.inputs[step]
    op = flow.operators[step]
    distinct_parents = len(parents) >= 2 and len(set(parents)) == len(parents)
    if step != flow.output or consumers[step] or not distinct_parents or op.scope not in ("query", "row") \
            or type(op).setup is not Operator.setup or flow.step_option(step, "num_gpus"):
        return False
    first = parents[0]
    return all((branch,) in stages and flow.operators[branch].scope == "query" and consumers[branch] == [step]
               and branch != flow.output and flow.inputs[branch] == flow.inputs[first]
               and not flow.step_option(branch, "num_gpus") and not flow.step_option(branch, "concurrency")
               and flow.step_option(branch, "batch_size") == flow.step_option(first, "batch_size")
               for branch in parents)


def stage_inputs(flow: Flow, stage: Stage) -> dict[str, tuple[str, ...]]:
    """Each fused step's inputs inside the stage (empty: it reads the stage's input, as its first step does)."""
    return {step: tuple(p for p in flow.inputs[step] if p in stage) for step in stage}


@dataclass(frozen=True)
class StageShape:
    """What a stage's input needs before it runs, and what its output will be."""

    regroup: bool            # shuffle into whole qid groups first (a query step over unaligned input)
    coalesce: bool           # concatenate into one block first (a corpus step)
    batch_size: int | None   # map_batches' batch size (None: whole blocks)
    out_aligned: bool        # every qid's output rows will lie in one block


def shape_stage(flow: Flow, stage: Stage, *, aligned: bool, one_row_per_qid: bool) -> StageShape:
    """The alignment rule (module docstring) for a stage over an input that is ``aligned`` or not."""
    op = flow.operators[stage[0]]
    batch_size = flow.step_option(stage[0], "batch_size")
    if op.scope == "query":
        return StageShape(regroup=not aligned, coalesce=False, batch_size=None, out_aligned=True)
    if op.scope == "corpus":
        return StageShape(regroup=False, coalesce=True, batch_size=None, out_aligned=True)
    out_aligned = one_row_per_qid or (aligned and not batch_size)
    for fused in stage[1:]:  # as if each ran on its own: it would cut qids with a batch size
        out_aligned = out_aligned and not flow.step_option(fused, "batch_size")
    return StageShape(regroup=False, coalesce=False, batch_size=batch_size or None, out_aligned=out_aligned)


@dataclass(frozen=True)
class InputCut:
    """The flow input cut into blocks: row bounds, and what the executor may assume of them."""

    bounds: list[int]
    aligned: bool
    one_row_per_qid: bool

    def pieces(self, table: pa.Table) -> list[pa.Table]:
        return [table.slice(a, b - a) for a, b in zip(self.bounds, self.bounds[1:]) if b > a] or [table]


def cut_input(table: pa.Table, cpus: int, batch_size: int | None = None, *, per_query: bool = False) -> InputCut:
    """A few blocks per CPU for parallelism, cut between qid runs where each qid's rows are together.

    ``batch_size`` is that of the query steps that read the input (``per_query``: only such steps read it).
    Their blocks are then cut only where the local executor ends one of their batches, so each of them
    sees the very batches it sees locally (an embedder's floats depend on which texts share a call), and a
    block may be as small as one batch: a query's work (a search, a forward pass) outweighs a block's cost.
    """
    n = table.num_rows
    least = (batch_size or n) if per_query else INPUT_BLOCK_ROWS
    parts = max(1, min(-(-n // max(1, least)), INPUT_BLOCKS_PER_CPU * max(1, cpus)))
    bounds = [round(i * n / parts) for i in range(parts + 1)]
    if "qid" not in table.column_names or not n:
        return InputCut(bounds, aligned=parts == 1, one_row_per_qid=False)
    qids = table.column("qid").to_numpy(zero_copy_only=False)
    runs = np.flatnonzero(qids[1:] != qids[:-1]) + 1  # where a new qid run starts
    distinct = pc.count_distinct(table.column("qid")).as_py()
    if len(runs) + 1 != distinct:  # a qid's rows are not together: cut anywhere, not aligned
        return InputCut(bounds if not per_query else [0, n], aligned=parts == 1 or per_query, one_row_per_qid=False)
    starts = np.r_[runs, n]
    if per_query:  # the local executor's batch ends, in rows
        ends = query_batch_ends(np.diff(np.r_[0, starts]).tolist(), batch_size)
        starts = np.r_[0, starts][ends]
    bounds = sorted({0, n, *(int(starts[np.searchsorted(starts, b)]) for b in bounds[1:-1])})
    return InputCut(bounds, aligned=True, one_row_per_qid=distinct == n)


def input_readers(flow: Flow, steps: Iterable[str]) -> tuple[int | None, bool]:
    """The batch size of the steps that read the flow input, and whether they all are query steps of that one
    batch size (so ``cut_input`` may cut the input at their batch ends)."""
    readers = [s for s in steps if not flow.inputs[s] and flow.operators[s].scope != "source"]
    sizes = {flow.step_option(s, "batch_size") for s in readers}
    per_query = bool(readers) and len(sizes) == 1 and all(flow.operators[s].scope == "query" for s in readers)
    return (sizes.pop() if per_query else None), per_query


@dataclass
class ClusterResources:
    """The cluster's CPUs and GPUs, and each stage's share of them."""

    flow: Flow
    cluster: dict[str, float]
    node_cpus: float | None = None  # the most CPUs one node has (None: the cluster's): a task's are one node's
    cpu_fallback: set[str] = field(default_factory=set)  # steps warned about already (GPUs)
    cpu_capped: set[str] = field(default_factory=set)  # the same, for CPUs

    @property
    def cpus(self) -> float:
        return self.cluster.get("CPU", 0)

    @property
    def gpus(self) -> float:
        return self.cluster.get("GPU", 0)

    def num_gpus(self, step: str) -> float:
        """The step's GPU hint; 0 on a cluster without that many GPUs (it runs on CPUs, as locally)."""
        wanted = self.flow.step_option(step, "num_gpus") or 0
        if wanted > self.gpus:
            if wanted and step not in self.cpu_fallback:
                self.cpu_fallback.add(step)
                log.warning("step '%s' asks for %s GPU(s) per actor but the Ray cluster has %s: running it "
                            "on CPUs", step, wanted, self.gpus)
            return 0
        return wanted

    def num_cpus(self, step: str) -> float | None:
        """The step's CPU hint, at most the CPUs of the cluster's largest node: Ray waits for ever to place a task
        or actor that asks for more (the local executor runs the step whatever it asks)."""
        wanted = self.flow.step_option(step, "num_cpus")
        most = self.cpus if self.node_cpus is None else self.node_cpus
        if wanted is None or not most or wanted <= most:
            return wanted
        if step not in self.cpu_capped:
            self.cpu_capped.add(step)
            log.warning("step '%s' asks for %g CPU(s) per task but the Ray cluster's largest node has %g: running "
                        "it with %g", step, wanted, most, most)
        return most

    def of_stage(self, stage: Stage) -> tuple[int | None, float | None, float]:
        """A stage's ``concurrency`` (its first step's), ``num_cpus`` (the most) and ``num_gpus``."""
        cpus = [c for c in (self.num_cpus(s) for s in stage) if c is not None]
        return self.flow.step_option(stage[0], "concurrency"), max(cpus) if cpus else None, self.num_gpus(stage[0])

    def fits(self, stages: Iterable[Stage]) -> bool:
        """Whether the cluster holds the smallest actor pools of these stages at once."""
        cpus = gpus = 0.0
        for stage in dict.fromkeys(stages):
            if runs_as_tasks(self.flow, stage):
                continue
            concurrency, num_cpus, num_gpus = self.of_stage(stage)
            actors = concurrency or 1
            cpus += (num_cpus or 0) * actors
            gpus += num_gpus * actors
        return cpus <= self.cpus + 1e-9 and gpus <= self.gpus + 1e-9

    def pool_size(self, stage: Stage) -> int:
        """The actors a stage's pool runs at most: its ``concurrency``, else as many as the cluster fits (a pool
        that autoscales grows to that), for a model step's input to be cut for."""
        return self.of_stage(stage)[0] or self.initial_actors(stage, INITIAL_ACTORS_MAX)

    def initial_actors(self, stage: Stage, inputs: int) -> int:
        """Actors an autoscaling pool starts with: as many as the cluster fits and ``inputs`` keep busy
        (a stage streamed after another gets ``inputs=1``, so it cannot take what the earlier one needs)."""
        _, num_cpus, num_gpus = self.of_stage(stage)
        fits = [self.cpus / num_cpus if num_cpus else float("inf"),
                self.gpus / num_gpus if num_gpus else float("inf"), inputs]
        return max(1, min(int(min(fits)), INITIAL_ACTORS_MAX))


def largest_node_cpus(nodes: list[dict]) -> float | None:
    """The most CPUs an alive node of Ray's node table (``ray.nodes()``) has; None when it lists none."""
    cpus = [node.get("Resources", {}).get("CPU", 0) for node in nodes if node.get("Alive")]
    return max(cpus) if cpus else None


def actors_for_blocks(rows: list[int]) -> int:
    """Actors worth starting over materialised blocks: one per block, one per ``INITIAL_ROWS_PER_ACTOR`` rows."""
    return min(len(rows), -(-sum(rows) // INITIAL_ROWS_PER_ACTOR))
