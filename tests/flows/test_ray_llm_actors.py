"""An LLM step on the Ray executor keeps every actor of its pool busy: its input is cut into blocks for them
(``ray_plan.spread_rows``, ``_ray_blocks.even_bounds``), so 40 queries that a retriever writes as one block reach
both actors of a ``concurrency: 2`` pool, and the table is the local executor's."""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pydantic import Field

from flows.executors._ray_blocks import even_bounds
from flows.executors.local import LocalExecutor
from flows.executors.ray_plan import SPREAD_BLOCKS_MAX, spread_rows, spreads_input, spreads_streamed_input
from flows.spec import FlowSpec
from operators.generate.answer import AnswerGenerator
from operators.llm.testing import KEY_ENV

ray = pytest.importorskip("ray")
from ray import cloudpickle  # noqa: E402

from tests.flows.ray_flows import flow_by_hand  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # TracedAnswer travels to the actors by value


# -- the plan: how many rows a block of a model step's input holds -------------------------------------------

def test_a_model_steps_input_is_cut_for_every_actor_and_at_most_its_batch_size():
    assert spread_rows([40], actors=2, batch_size=200) == 20  # one retriever block of 40 queries: one per actor
    assert spread_rows([2560], actors=2, batch_size=200) == 197  # 13 blocks of at most a batch each
    assert spread_rows([20, 20], actors=2, batch_size=200) is None  # already one block per actor
    assert spread_rows([40], actors=1, batch_size=200) is None  # one actor takes everything anyway
    assert spread_rows([40], actors=4, batch_size=None) == 10
    assert spread_rows([100_000], actors=2, batch_size=200) == -(-100_000 // SPREAD_BLOCKS_MAX)  # not 500 blocks


def test_a_few_queries_stream_into_a_model_step_uncut():
    """Cutting a streamed input waits for the steps before it: worth it for many queries' calls, not for one."""
    assert not spreads_streamed_input(1) and not spreads_streamed_input(8)
    assert spreads_streamed_input(40) and spreads_streamed_input(0)  # 0: the flow starts at a source


def test_only_an_actor_pool_stage_that_calls_a_model_or_asks_for_gpus_is_spread():
    flow = FlowSpec.parse({"name": "s", "steps": {
        "words": {"op": "analyze.word_count"},
        "pooled": {"op": "analyze.word_count", "concurrency": 2, "inputs": ["words"]},
        "answer": {"op": "generate.answer", "params": {"context_column": None}, "inputs": ["words"]},
        "on_gpus": {"op": "analyze.word_count", "num_gpus": 0.25, "concurrency": 4, "inputs": ["words"]},
        "one_call": {"op": "preprocess.dedup", "num_gpus": 1, "inputs": ["words"]},  # a corpus step: one call
    }, "output": "answer"}).build()
    assert spreads_input(flow, ("answer",)) and spreads_input(flow, ("on_gpus",))
    assert not spreads_input(flow, ("words",)) and not spreads_input(flow, ("pooled",))
    assert not spreads_input(flow, ("one_call",))


def test_even_bounds_keep_each_qids_rows_in_one_piece():
    table = pa.table({"qid": ["a"] * 3 + ["b"] * 3 + ["c"] * 2 + ["d"] * 4, "x": list(range(12))})
    assert even_bounds(table, 2, whole_qids=True) == [0, 6, 12]
    assert even_bounds(table, 3, whole_qids=True) == [0, 6, 8, 12]  # even cuts at 4 and 8 move to 6 and 8
    assert even_bounds(table, 3, whole_qids=False) == [0, 4, 8, 12]
    scattered = pa.table({"qid": ["a", "b", "a", "b"]})  # no place where no qid is on both sides
    assert even_bounds(scattered, 2, whole_qids=True) == [0, 4]
    nulls = pa.table({"qid": pa.array(["a", "a", None, None], pa.string())})
    assert even_bounds(nulls, 2, whole_qids=True) == [0, 2, 4]


# -- on Ray: both actors of the pool answer ---------------------------------------------------------------


class TracedAnswer(AnswerGenerator):
    """``generate.answer`` that appends its process id and each query's qid to ``trace``. The session's Ray
    workers started before the fault server, so each process that builds it takes the fault server's aliases
    (``models``) into its environment first, as the driver has them."""

    name = "test.traced_answer"

    class Params(AnswerGenerator.Params):
        trace: str = Field(..., description="File that gets a line 'pid qid' per query answered.")
        models: str = Field(..., description="The fault server's models.yaml.")

    def __init__(self, params: Any, **kwargs: Any) -> None:
        values = params if isinstance(params, dict) else params.model_dump()
        os.environ["TESSERA_MODELS"] = values["models"]
        os.environ.setdefault(KEY_ENV, "sk-fault-test")
        super().__init__(params, **kwargs)

    def transform(self, table: pa.Table) -> pa.Table:
        with open(self.params.trace, "a", encoding="utf-8") as trace:
            trace.write("".join(f"{os.getpid()} {qid}\n" for qid in table.column("qid").to_pylist()))
        return super().transform(table)


def traced_flow(trace: Path, models: str):
    answer = TracedAnswer({"model": "fault-slow", "context_column": None, "concurrency": 1, "num_retries": 0,
                           "trace": str(trace), "models": models})
    return flow_by_hand("traced", [("answer", answer, None)])  # LLMStep.concurrency: a pool of 2 actors


@pytest.mark.ray
@pytest.mark.slow  # 40 calls of 0.25 s locally, then on Ray: about 20 s
def test_an_llm_step_over_40_queries_reaches_both_actors_of_its_pool(fault_models, tmp_path, ray_session):
    from flows.executors.ray_data import RayDataExecutor

    fault_models.delay = 0.25  # each call; one call at a time per process (params.concurrency 1)
    models = os.environ["TESSERA_MODELS"]
    queries = pa.table({"qid": [f"q{i}" for i in range(40)], "query": [f"what do bees make {i}?" for i in range(40)]})
    local = LocalExecutor().run(traced_flow(tmp_path / "local.trace", models), queries)
    fault_models.reset()
    fault_models.delay = 0.25  # (reset puts it back to 5 s)
    on_ray = RayDataExecutor().run(traced_flow(tmp_path / "ray.trace", models), queries)
    assert on_ray.table.equals(local.table)
    assert {q: m["answer"] for q, m in on_ray.metadata.items()} == {q: m["answer"] for q, m in local.metadata.items()}
    lines = [line.split() for line in (tmp_path / "ray.trace").read_text().splitlines()]
    assert sorted(qid for _, qid in lines) == sorted(queries.column("qid").to_pylist())  # each answered once
    per_actor = Counter(pid for pid, _ in lines)
    assert len(per_actor) == 2 and str(os.getpid()) not in per_actor, per_actor  # both actors, 20 queries each
    assert fault_models.peak == 2  # the model server saw actors x params.concurrency calls at once, no more
