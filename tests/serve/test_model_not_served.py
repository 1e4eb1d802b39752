"""``GET /v1/models/{id}``'s 404 for an id that names no model or flow (``serve.api.not_served``): it lists what the
service can run, as ``GET /v1/models`` offers it, and as a chat's 404 does (tests/serve/test_chat_target.py): not a
flow listed there as ``missing`` (``rag_gold`` needs tessera bench's dataset) nor a configured model whose weights are
absent, which it listed as served. Real flow files in a temporary $TESSERA_HOME (``chat_flows.flow_cards``); nothing
runs, so no Ray (over HTTP: tests/serve/test_readiness.py)."""

from __future__ import annotations

import pytest

from serve.chat_flows import flow_cards
from serve.schemas import ModelCard
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve

SMOLLM2 = {"deployment": "smollm2", "kind": "llm", "engine": "llama_cpp", "model": "smollm2-135m-instruct"}


@pytest.fixture
def service(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TESSERA_MODELS", raising=False)
    args = ServiceArgs(default_index=str(tmp_path), task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    return Service(resolve(args, environ={}), [SMOLLM2], "tessera")


def test_the_404_lists_only_what_the_service_can_run(service):
    from serve.api import not_served

    models = [ModelCard(id="all-MiniLM-L6-v2", type="embedding", operator="embed.sentence_transformer",
                        deployment="minilm", status="ready"),
              ModelCard(id="absent-ce", type="rerank", operator="rerank.cross_encoder", deployment="absent-ce",
                        status="missing", reason="no such model"),
              ModelCard(id="smollm2", type="chat", operator="llama_cpp", deployment="smollm2", status="loading")]
    flows = flow_cards("local", models)
    assert {card.id: card.status for card in flows}["rag_gold"] == "missing"
    err = not_served("rag_gld", [*models, *flows])
    assert (err.status, err.code, err.param) == (404, "model_not_found", "model")
    assert err.message.startswith("model 'rag_gld' is not served here")
    served = err.message.split("; served: ", 1)[1].split(", ")
    assert served == sorted(card.id for card in [*models, *flows] if card.status != "missing")
    assert "all-MiniLM-L6-v2" in served and "smollm2" in served and "rag" in served  # loading is served, not missing
    assert "rag_gold" not in err.message and "absent-ce" not in err.message  # nor offered as a close name
    assert "did you mean 'rag'" in not_served("rga", [*models, *flows]).message
