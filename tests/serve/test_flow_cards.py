"""The flows ``GET /v1/models`` lists (``chat_flows.flow_cards``) are worked out once per version of what they read,
so a flow saved, changed or deleted while the app serves, and an edited models file, show at the next call. Real
files in a temporary $TESSERA_HOME; nothing runs, so no Ray."""

from __future__ import annotations

import pytest

from flows import store as flow_store
from flows.spec import FlowSpec
from serve.chat.chat_flows import answering_flows, flow_cards
from serve.schemas import ModelCard
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve

SMOLLM2 = {"deployment": "smollm2", "kind": "llm", "engine": "llama_cpp", "model": "smollm2-135m-instruct"}
ANSWER = {"op": "generate.answer", "params": {"model": "mine"}}


@pytest.fixture
def models_file(tmp_path, monkeypatch):
    path = tmp_path / "models.yaml"
    path.write_text("mine: tessera/smollm2-135m-instruct\n")  # the alias names the model the deployment runs
    monkeypatch.setenv("TESSERA_MODELS", str(path))
    return path


@pytest.fixture
def service(tmp_path, monkeypatch, models_file):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=str(tmp_path), task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    return Service(resolve(args, environ={}), [SMOLLM2], "tessera")


def cards() -> dict[str, ModelCard]:
    loading = ModelCard(id="smollm2", type="chat", operator="llama_cpp", deployment="smollm2", status="loading",
                        reason="1 replica starting")
    return {card.id: card for card in flow_cards("local", [loading])}


def test_a_flow_saved_changed_and_deleted_while_serving(service):
    assert "mine" not in cards() and "rag" in cards()
    flow_store.save("mine", FlowSpec.parse({"steps": {"answer": ANSWER}}))
    assert cards()["mine"].status == "loading"  # its answer runs on smollm2, which is loading
    assert "mine" in answering_flows("local")
    flow_store.save("mine", FlowSpec.parse({"steps": {"gold": {"op": "retrieve.gold"}, "answer": ANSWER}}))
    assert cards()["mine"].status == "missing" and "params.dataset" in cards()["mine"].reason
    flow_store.save("mine", FlowSpec.parse({"steps": {"bm25": {"op": "retrieve.bm25"}}}))  # answers no more
    assert "mine" not in cards() and "mine" not in answering_flows("local")
    flow_store.save("mine", FlowSpec.parse({"steps": {"answer": ANSWER}}))
    flow_store.delete("mine")
    assert "mine" not in cards()


def test_an_edited_models_file_moves_a_flow_off_the_deployment(service, models_file, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    flow_store.save("mine", FlowSpec.parse({"steps": {"answer": ANSWER}}))
    assert cards()["mine"].status == "loading"
    models_file.write_text("mine: openai/gpt-4o-mini\n")  # the alias now names a model no deployment runs...
    assert cards()["mine"].status == "missing" and "$OPENAI_API_KEY" in cards()["mine"].reason  # ...and needs a key
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # (a service's environment is fixed: the file changes too)
    models_file.write_text("# with its key\nmine: openai/gpt-4o-mini\n")
    assert cards()["mine"].status == "ready" and cards()["mine"].reason is None
    models_file.write_text("mine: tessera/smollm2-135m-instruct\n")
    assert cards()["mine"].status == "loading"
