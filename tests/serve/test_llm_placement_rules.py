"""Which language-model steps the service places on a language-model deployment (``Service.place``, what every
flow route calls): those whose alias names the model the deployment runs, and only when they call a model; nothing
runs, so no Ray."""

from __future__ import annotations

import pytest

from flows.spec import FlowSpec
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve

SMOLLM2 = {"deployment": "smollm2", "kind": "llm", "engine": "llama_cpp", "model": "smollm2-135m-instruct"}


@pytest.fixture
def service(tmp_path):
    args = ServiceArgs(default_index=str(tmp_path), task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    return Service(resolve(args, environ={}), [SMOLLM2], "tessera")


def placed(service: Service, steps: dict) -> dict[str, str | None]:
    spec = service.place(FlowSpec.parse({"name": "f", "steps": steps}))
    return {step_id: step.placement.deployment if step.placement else None for step_id, step in spec.steps.items()}


def test_rags_answer_goes_to_the_deployment_and_its_history_rewrite_stays(service):
    spec = service.place(FlowSpec.load("rag").with_index("/tmp/index"))
    assert spec.steps["answer"].placement.deployment == "smollm2" and spec.steps["answer"].placement.app == "tessera"
    assert spec.steps["standalone"].placement is None  # method history: no model call, nothing to place
    assert spec.steps["bm25"].placement is None  # no deployment serves it here


def test_only_a_step_that_asks_the_deployments_model(service, tmp_path):
    copy = tmp_path / "other.gguf"
    copy.write_bytes(b"GGUF")  # another file: not the model the deployment runs, whatever its name says
    assert placed(service, {
        "rewrite": {"op": "query.contextualize", "params": {"method": "llm"}},
        "as_path": {"op": "generate.answer", "params": {"model": "tessera/smollm2-135m-instruct"}},
        "ollama": {"op": "generate.answer", "params": {"model": "gemma2"}},
        "other_file": {"op": "generate.answer", "params": {"model": f"tessera/{copy}"}},
        "named": {"op": "generate.answer", "params": {"model": "local"},
                  "placement": {"deployment": "mine", "app": "other"}},
        "judge": {"op": "rerank.llm_group", "params": {"model": "local"}},
    }) == {"rewrite": "smollm2", "as_path": "smollm2", "ollama": None, "other_file": None, "named": "mine",
           "judge": "smollm2"}


@pytest.mark.parametrize("op", ["rerank.llm_tournament", "rerank.llm_group"])
def test_an_llm_reranker_is_placed_as_a_language_model_step_not_as_a_reranker(op):
    """An LLM judge is a reranker too; as one it was sent to the deployment as a cross-encoder (a flow the service
    placed on its llm deployment failed to build: 'hosts None, not rerank.llm_group')."""
    from flows.placement import ServedLLMStep, served_base
    from operators import create

    assert served_base(create(op, {"model": "local"}, step_id="judge")) == (ServedLLMStep, "llm")


def test_a_placement_on_a_deployment_this_app_does_not_serve_is_refused_naming_it(service):
    """A misspelt deployment (or one whose model the app skipped as missing) was a 503 once the flow ran, the same
    however long the client waited, and a task that failed after it was queued; now the request's 422, before."""
    from operators.errors import SpecError

    with pytest.raises(SpecError) as err:
        placed(service, {"answer": {"op": "generate.answer", "params": {"model": "local"},
                                    "placement": {"deployment": "smollm3"}}})
    assert err.value.field == "steps.answer.placement.deployment"
    assert "no deployment named 'smollm3' serves a model in this app; did you mean 'smollm2'?" in err.value.message


def test_a_flow_on_a_deployment_that_is_not_ready_is_listed_as_not_ready(service):
    from serve.chat.chat_flows import flow_cards
    from serve.schemas import ModelCard

    def smollm2(status: str) -> ModelCard:
        return ModelCard(id="smollm2", type="chat", operator="llama_cpp", deployment="smollm2", status=status,
                         reason=None if status == "ready" else "1 replica starting")

    ready = {card.id: card for card in flow_cards("local", [smollm2("ready")])}
    assert ready["rag"].status == "ready" and ready["rag"].reason is None
    loading = {card.id: card for card in flow_cards("local", [smollm2("loading")])}
    assert loading["rag"].status == "loading"
    assert loading["rag"].reason == "runs on model 'smollm2', which is loading (1 replica starting)"
    assert {card.id for card in loading.values()} == {card.id for card in ready.values()}
