"""How an LLM step runs on the Ray Data executor: a bounded actor pool towards the model, vLLM only on GPUs, and
row-wise steps' messages/apply giving the same rows through the gateway and through ray.data.llm's functions."""

from __future__ import annotations

import importlib.util
import json

import pyarrow as pa
import pytest

from flows.executors.ray_llm import SENT, llm_engine, row_functions
from flows.executors.ray_plan import ClusterResources, runs_as_tasks
from flows.spec import FlowSpec
from operators.llm import LLMError, complete
from operators.registry import create
from operators.testing import sample_results


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


# -- row-wise LLM steps: one messages/apply contract for the gateway and ray.data.llm -----------------------

ROWWISE = [("summarize.documents", {"num_retries": 0}),
           ("analyze.relevance_marking", {"max_tokens": 64, "num_retries": 0})]


@pytest.fixture
def vllm_aliases(fault_models, tmp_path, monkeypatch):
    """The fault server's aliases, each with a ``model_source`` for vLLM."""
    monkeypatch.setenv("TESSERA_MODELS", str(fault_models.models_file(tmp_path / "models.yaml",
                                                                      model_source="org/model")))
    return fault_models


def rowwise_step(op: str, model: str, **params):
    return create(op, {"model": model, **params}, step_id="llm")


@pytest.mark.parametrize("op, params", ROWWISE)
def test_a_rowwise_step_given_gpus_takes_vllm_only_where_it_can(vllm_aliases, op, params):
    step = rowwise_step(op, "fault-ok", **params)
    assert llm_engine(step, num_gpus=1, vllm_installed=True) == "vllm"
    assert llm_engine(step, num_gpus=0, vllm_installed=True) == "gateway"
    assert llm_engine(step, num_gpus=1, vllm_installed=False) == "gateway"
    no_source = rowwise_step(op, "openai/gpt-4o-mini", **params)  # an API model: nothing for vLLM to load
    assert llm_engine(no_source, num_gpus=1, vllm_installed=True) == "gateway"


def test_a_step_that_calls_once_per_query_keeps_the_gateway_on_gpus(vllm_aliases):
    answer = create("generate.answer", {"model": "fault-ok"}, step_id="answer")
    assert llm_engine(answer, num_gpus=1, vllm_installed=True) == "gateway"


def engine(row: dict, model: str) -> dict:
    """What the vLLM stage adds to a preprocessed row, computed by the gateway: the same messages and sampling (a
    row the step does not send gets a stray token, which ``finish`` must ignore)."""
    sampling = row["sampling_params"]
    if not row[SENT]:
        return {**row, "generated_text": "stray", "num_generated_tokens": 1, "__inference_error__": ""}
    try:
        done = complete(row["messages"], model=model, temperature=sampling["temperature"],
                        max_tokens=sampling["max_tokens"], num_retries=0)
    except LLMError as err:
        return {**row, "generated_text": "", "num_generated_tokens": 0, "__inference_error__": err.message}
    return {**row, "generated_text": done.text, "num_input_tokens": done.prompt_tokens,
            "num_generated_tokens": done.completion_tokens, "__inference_error__": ""}


def through_processor_functions(step, table: pa.Table, model: str) -> pa.Table:
    preprocess, finish = row_functions(step)
    return pa.Table.from_pylist([finish(engine(preprocess(row), model)) for row in table.to_pylist()])


@pytest.mark.parametrize("op, params", ROWWISE)
@pytest.mark.parametrize("model", ["fault-ok", "fault-error"])
def test_the_processor_functions_write_what_the_gateway_writes(vllm_aliases, op, params, model):
    vllm_aliases.reply = "Bees **make honey**." if op == "analyze.relevance_marking" else "A summary."
    table = sample_results(2, 2)
    table = table.set_column(table.column_names.index("text"), "text",
                             pa.array(["Bees make honey.", "", "Bees make honey.", "Ants do not."]))
    gateway = rowwise_step(op, model, **params)(table)
    sent = len(vllm_aliases.bodies)
    processed = through_processor_functions(rowwise_step(op, model, **params), table, model)
    assert processed.to_pylist() == gateway.to_pylist()
    requests = [json.dumps(body, sort_keys=True) for body in vllm_aliases.bodies]
    assert sorted(requests[sent:]) == sorted(requests[:sent])  # the very requests (the gateway's run at once)


@pytest.mark.slow
def test_the_embedded_model_gives_the_same_rows_both_ways():
    """Slow: loads the embedded SmolLM2 and makes eight calls with it (381 s on the 2 shared cores at load 25)."""
    table = sample_results(1, 2)
    for op, params in ROWWISE:
        gateway = rowwise_step(op, "local", max_tokens=48)(table)
        processed = through_processor_functions(rowwise_step(op, "local", max_tokens=48), table, "local")
        assert processed.to_pylist() == gateway.to_pylist()
