"""Over HTTP, the steps ``retrieve.multi_collection`` runs inside itself (``postprocess``) are checked as the steps of
the flow are: a local file outside the data roots and an environment variable not set where the service runs are
the same 4xx as in an outer step, the field named in full (``steps.m.params.postprocess.0.params.<name>``), before
any step runs. Before, only the outer step's params were looked at. The service's FastAPI app under uvicorn on
127.0.0.1 (no Ray: every refusal comes before a task starts)."""

from __future__ import annotations

import pytest
import requests

from tests.text_checks import TRACEBACK


BM25 = {"op": "retrieve.bm25", "params": {"k": 5}}
ROUTES = ("/v1/search", "/task/run", "/task/enqueue")


def nested(post: dict) -> dict:
    """``post`` as the one postprocessor of a ``retrieve.multi_collection`` step ``m``."""
    return {"m": {"op": "retrieve.multi_collection", "params": {"collections": [{"name": "a", "index": "news"}],
                                                                "postprocess": [post]}}}


def errors(base: str, steps: dict) -> list[tuple[int, dict]]:
    """Each flow route's status and error object for a body of ``steps``; nothing may have been queued."""
    before = requests.get(f"{base}/tasks", timeout=30).json()["tasks"]
    answers = [requests.post(base + route, json={"flow": {"steps": steps}, "query": "honey bees"}, timeout=120)
               for route in ROUTES]
    assert requests.get(f"{base}/tasks", timeout=30).json()["tasks"] == before
    assert not any(TRACEBACK in answer.text for answer in answers)
    return [(answer.status_code, answer.json().get("error")) for answer in answers]


@pytest.mark.parametrize("token_store", ["/etc", "data/../../etc"])
def test_a_nested_local_path_outside_the_data_roots_is_refused_as_an_outer_one(base, token_store):
    colbert = {"op": "rerank.colbert", "params": {"token_store": token_store}}
    outer = errors(base, {"bm25": BM25, "cb": colbert})
    inner = errors(base, nested(colbert))
    for (outer_status, outer_error), (status, error) in zip(outer, inner):
        assert (outer_status, outer_error["code"]) == (422, "path_not_allowed"), outer_error
        assert status == outer_status, error
        field = "steps.m.params.postprocess.0.params.token_store"
        assert error == {**outer_error, "param": field,
                         "message": outer_error["message"].replace("steps.cb.params.token_store", field)}


def test_a_nested_local_path_inside_the_data_roots_passes_that_check(base):
    """``data/sample`` (the default data root) is read by an outer step and a nested one alike: what comes next is
    the missing ColBERT model's 404, not a refused path."""
    for status, error in errors(base, nested({"op": "rerank.colbert", "params": {"token_store": "data/sample"}})):
        assert (status, error["code"]) == (404, "model_not_found"), error


RERANK_API = {"op": "rerank.api", "params": {"url": "https://rerank.example.com/v1/rerank",
                                             "api_key_env": "TESSERA_TEST_NESTED_KEY"}}
LLM_RERANK = {"op": "rerank.llm_group", "params": {"model": "DeepSeekv3"}}  # its alias reads DEEPSEEK_API_KEY


@pytest.mark.parametrize("step, variable, param", [(RERANK_API, "TESSERA_TEST_NESTED_KEY", "api_key_env"),
                                                   (LLM_RERANK, "DEEPSEEK_API_KEY", "model")],
                         ids=["api_key_env", "alias-key"])
def test_a_nested_variable_not_set_is_refused_as_an_outer_one_before_any_step_runs(base, monkeypatch, step, variable,
                                                                                   param):
    """Accepted, the task ran its retrieval and failed at the nested reranker (its key unset)."""
    from serve import service as svc

    monkeypatch.setenv("TESSERA_ALLOW_ENV", "TESSERA_TEST_NESTED_KEY")
    monkeypatch.delenv(variable, raising=False)
    outer = errors(base, {"bm25": BM25, "r": step})
    inner = errors(base, nested(step))
    for (outer_status, outer_error), (status, error) in zip(outer, inner):
        assert (outer_status, outer_error["code"]) == (422, "env_not_set"), outer_error
        assert outer_error["param"] == f"steps.r.params.{param}", outer_error
        field = f"steps.m.params.postprocess.0.params.{param}"
        assert (status, error["param"]) == (422, field), error
        assert error == {**outer_error, "param": field, "message": outer_error["message"].replace(
            f"(step r, params.{param})", f"(step m, params.postprocess.0.params.{param})")}
        assert f"${variable} (step m, params.postprocess.0.params.{param}), not set where this service runs" in \
            error["message"]
    monkeypatch.setenv(variable, "k-123")  # set: the flow is prepared (not run: that would need Ray)
    svc.current().prepare({"flow": {"steps": nested(step)}, "query": "honey bees"}, "local")
