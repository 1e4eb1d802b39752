"""``GET /pipeline/info`` offers a language model param the models this service runs, its aliases (the packaged
ones and its models file's): the operators' own text offered "any litellm model string ('ollama_chat/phi3')",
which the same service refuses as ``model_not_allowed``. The API on uvicorn beside a real ``Service``."""

from __future__ import annotations

import requests


def test_a_language_model_param_offers_this_services_aliases(tmp_path, monkeypatch, make_service):
    models = tmp_path / "models.yaml"
    models.write_text("mine:\n  model: ollama_chat/x\n  api_base: http://127.0.0.1:9\n", encoding="utf-8")
    monkeypatch.setenv("TESSERA_MODELS", str(models))
    from tests.serve.conftest import api_on_localhost

    make_service()
    with api_on_localhost() as base:
        info = requests.get(f"{base}/pipeline/info", timeout=60).json()
        for op in ("summarize.results", "generate.answer", "rerank.llm_tournament", "query.expand"):
            model = info[op]["parameters"]["model"]
            assert {"local", "mine"} <= set(model["supported-values"]) and model["enforce-limit"] is True, model
            assert "litellm model string" not in model["description"] and "mine" in model["description"]
        refused = requests.post(f"{base}/task/run", json={"query": "honey", "1": {"id": "bm25"}, "2": {
            "id": "summarize.results", "parameters": {"model": "ollama_chat/phi3"}}}, timeout=60)
        assert refused.status_code == 422 and refused.json()["error"]["code"] == "model_not_allowed"
