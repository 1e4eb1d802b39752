"""The Ray Data executor: every step (or fused chain of row steps) is a ``map_batches`` stage.

``RayDataExecutor().run(flow, queries)`` returns the same ``FlowResult`` as the local
executor: the same final table (rows, order, schema), step records, hit ratios,
metadata and history. Operators know nothing of Ray: ``_ray_udfs`` wraps each one in a
callable class around a ``StepRunner`` (so the step cache works as in the local executor).
A stage runs as tasks (``ray_plan.runs_as_tasks``), and each worker process keeps the
operators it has set up for its later blocks and the driver's later runs; a GPU or
``concurrency`` stage gets an actor pool, one operator per actor. An operator sets itself
up on its first call, so a worker whose batches all come from the cache never loads a model.

Five modules share the work: ``ray_plan`` decides (stages, fusion, alignment, input
blocks, resources; no Ray), ``ray_frames`` holds each step's output and reshapes it
between stages, ``ray_progress`` follows the run from the calling thread, and ``ray_run``
builds the datasets on a worker thread (this module checks the flow and starts Ray). How each scope runs:

* ``row``: ``map_batches(batch_size=<step batch size>)``;
* ``query``: over an aligned dataset (regrouped first if it is not) with
  ``batch_size=None``; the callable cuts each block into whole-group batches of about
  ``batch_size`` rows, the local executor's rule (``base.query_batch_ends``);
* ``corpus``: the input coalesced into one block, one call;
* ``source``: the operator's ``splits()`` as a dataset of split indices, mapped with
  batch size 1; splits travel pickled when they can, else each actor recomputes them;
* a step that calls a model or asks for GPUs, on an actor pool: its input materialised and cut into blocks for
  every actor the pool holds (``ray_plan.spread_rows``), whole blocks to the callable, one at a time per actor.

With ``keep_history=True`` (the default, as in the local executor) every step is
materialised so its output can be kept: steps run one after another, each in parallel.
``keep_history=False`` streams steps into each other and materialises only where needed
(fan-in parents, shared steps, regroups, corpus inputs, the output); an output fan-in over
query steps runs with them in one stage (``ray_plan``), and its collected rows are put in
the local order (``group_order.in_local_order``).

Known limits: if Ray re-runs a batch after a worker died, its statistics count twice
(the rows do not); blocks of one step whose schemas differ are conformed only where they
meet a fan-in; a single qid whose rows from one batch exceed half of
``target_max_block_size`` (64 MiB) may be sliced across blocks, which the alignment rule
does not notice. ``ray_frames.materialize`` reads block references through
``iter_internal_ref_bundles`` and GPU stages without a batch size use
``map_batches_internal``: Ray Data has no public API for either.
"""

from __future__ import annotations

import gc
import traceback
import warnings
from typing import Any, Iterable

import pyarrow as pa

from flows.cache import StepCache
from flows.executors.base import RunState, as_flow, as_queries
from flows.executors.ray_env import ensure_ray, quiet_ray_data
from flows.executors.ray_plugins import check_plugins_on_workers
from flows.executors.ray_run import RayRun
from flows.model_check import check_env
from flows.progress import CancelToken, ProgressCallback
from flows.result import FlowResult
from flows.spec import Flow, FlowSpec
from operators.errors import SpecError


class RayDataExecutor:
    """Runs a flow as Ray Data stages; same results as ``LocalExecutor``.

    Ray is started (quiet, no dashboard; ``ray_init_kwargs`` added) only when this process
    is not connected yet. ``keep_history=False`` lets steps stream into each other.
    """

    name = "ray"

    def __init__(self, *, cache: StepCache | None = None, keep_history: bool = True,
                 ray_init_kwargs: dict[str, Any] | None = None):
        self.cache = cache
        self.keep_history = keep_history
        self.ray_init_kwargs = dict(ray_init_kwargs or {})
        self._warm = False

    def start(self, *, warm: bool = False) -> None:
        """Start a local Ray, or join ``RAY_ADDRESS``, now rather than in the first ``run``. ``warm``: also run a
        one-row flow once, so that the job's workers, Ray Data's own actors and the progress reporter are up before
        a run that is timed (``tessera bench``: seconds, not tenths, of a first run were Ray's)."""
        ensure_ray(**self.ray_init_kwargs)
        if warm and not self._warm:
            from flows.spec import FlowSpec

            warm_up = FlowSpec.model_validate({"name": "warm_up", "steps": {
                "words": {"op": "analyze.word_count", "params": {"input_column": "query"}}}})
            RayDataExecutor(ray_init_kwargs=self.ray_init_kwargs).run(warm_up.build(), ["warm up"],
                                                                       progress=lambda event: None)
            self._warm = True

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
        check_env(flow)  # a step's unset key, before Ray starts and the steps in front of it run
        state = RunState(flow, self.name, cache=self.cache, progress=progress, cancel=cancel)
        flow_input = as_queries(queries)
        state.input_rows = flow_input.num_rows
        flow.check_input(flow_input.column_names)  # columns no step brings, filters the index cannot take
        state.cancel.raise_if_cancelled()
        self.start()
        check_plugins_on_workers(flow, state.steps)
        _ignore_few_inputs_warning()
        with quiet_ray_data():
            try:
                return RayRun(flow, state, flow_input, keep_history=self.keep_history).execute()
            except BaseException as err:
                failed = err
        _let_the_failed_run_go(failed)
        raise failed


def _let_the_failed_run_go(failed: BaseException) -> None:
    """A stage's task in flight when a run fails or is cancelled keeps its actor (the CPUs and the model it holds)
    through a reference cycle in Ray Data's actor pool operator until the collector breaks it: the next run's stages
    waited for those CPUs, in a notebook until something else collected (ray-project/ray#24948). So the error's
    frames, and those of the errors it came from (the stage's, raised on the run's worker thread), let the run go
    (their locals only: the tracebacks read the same), and the collector runs now."""
    cause, seen = failed, set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        traceback.clear_frames(cause.__traceback__)
        cause = cause.__cause__ or cause.__context__
    gc.collect()


def _ignore_few_inputs_warning() -> None:
    """Drop Ray Data's UserWarning "The minimum number of concurrent actors for '...' is set to N, but the operator
    only received M input(s)": a step's ``concurrency`` sets its actor pool's size, and a run with fewer blocks
    than that (a few queries) starts actors it does not use, which is harmless. Every other warning stays."""
    warnings.filterwarnings("ignore", category=UserWarning,
                            module=r"ray\.data\._internal\.execution\.operators\.actor_pool_map_operator",
                            message=r"The minimum number of concurrent actors for .* but the operator only received")
