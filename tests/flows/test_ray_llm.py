"""How an LLM step runs on the Ray Data executor: a bounded actor pool towards the model, vLLM only on GPUs."""

from __future__ import annotations

import importlib.util

import pytest

from flows.executors.ray_llm import llm_engine
from flows.executors.ray_plan import ClusterResources, runs_as_tasks
from flows.spec import FlowSpec


def answer_flow(**step) -> object:
    return FlowSpec.parse({"name": "a", "steps": {"answer": {"op": "generate.answer", **step}}}).build()


def test_an_llm_step_gets_a_fixed_pool_of_actors_however_large_the_cluster():
    flow = answer_flow(params={"concurrency": 3})
    concurrency, _, _ = ClusterResources(flow, {"CPU": 256}).of_stage(("answer",))
    assert not runs_as_tasks(flow, ("answer",))  # tasks would fan out to every CPU of the cluster
    assert concurrency == 2  # actors; each sends params.concurrency calls at once: 2 x 3 in flight at most
    assert ClusterResources(answer_flow(concurrency=5), {"CPU": 256}).of_stage(("answer",))[0] == 5


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_without_vllm_every_llm_step_uses_the_gateway():
    op = answer_flow().operators["answer"]
    assert llm_engine(op, num_gpus=1) == "gateway" and llm_engine(op, num_gpus=0) == "gateway"


def test_a_step_that_is_no_llm_step_never_takes_the_vllm_path():
    flow = FlowSpec.parse({"name": "w", "steps": {"w": {"op": "analyze.word_count"}}}).build()
    assert llm_engine(flow.operators["w"], num_gpus=1) == "gateway"
