"""Where a chat request's ``model`` goes (``serve.chat.chat.chat_target``), and the 404 for a name that is neither a
served model nor a flow that answers: it lists what ``GET /v1/models`` offers (``chat_flows.flow_cards``), not a flow
listed there as ``missing`` (``rag_gold`` needs tessera bench's dataset); so does ``GET /v1/models/{id}``'s 404
(``serve.api.not_served``), which listed such flows and models whose weights are absent as served (over HTTP:
tests/serve/test_readiness.py). Real files in a temporary $TESSERA_HOME; nothing
runs, so no Ray."""

from __future__ import annotations

import pytest

from serve.chat.chat import chat_target
from serve.chat.chat_flows import flow_cards
from serve.http.errors import ApiError
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


def test_the_404_lists_only_the_flows_models_offers(service):
    ready = ModelCard(id="smollm2", type="chat", operator="llama_cpp", deployment="smollm2", status="ready")
    gone = ModelCard(id="big", type="chat", operator="vllm", deployment="big", status="missing", reason="no vllm")
    by_name = {"smollm2": ready, "big": gone}
    cards = {card.id: card for card in flow_cards("local")}
    assert cards["rag"].status != "missing" and cards["rag_gold"].status == "missing"
    assert chat_target("smollm2", by_name, "local") is ready
    with pytest.raises(ApiError) as err:
        chat_target("no-such-flow", by_name, "local")
    assert err.value.status == 404 and err.value.code == "model_not_found"
    served, flows = err.value.message.split("served: ", 1)[1].split("; flows: ")
    assert served == "smollm2"
    assert set(flows.split(", ")) == {name for name, card in cards.items() if card.status != "missing"}
    assert "rag" in flows.split(", ") and "rag_gold" not in flows


def test_the_models_route_404_lists_only_what_the_service_can_run(service):
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


def test_a_long_or_multiline_model_name_is_quoted_cut_on_one_line_as_a_flows_or_an_indexs(service):
    """The 404s quoted the name whole: a 100 kB ``model`` came back in a 100 kB message, and a newline in it broke the
    message's line, where a flow's, an index's and a document id's refusals quote 60 characters on one line."""
    from serve.api import not_served
    from serve.security.spec_guard import check_llm

    ready = ModelCard(id="smollm2", type="chat", operator="llama_cpp", deployment="smollm2", status="ready")
    for name, quoted in (("m" * 100_000, "m" * 60 + "…"), ("two\nlines", "two lines")):
        with pytest.raises(ApiError) as err:
            chat_target(name, {"smollm2": ready}, "local")
        assert err.value.message.startswith(f"model '{quoted}' is neither a language model"), err.value.message[:200]
        assert len(err.value.message) < 1000
        assert not_served(name, [ready]).message.startswith(f"model '{quoted}' is not served here")
        with pytest.raises(ApiError) as err:
            check_llm(name, "steps.answer.params.model")
        assert err.value.message.startswith(f"steps.answer.params.model: model '{quoted}' is not an alias")
