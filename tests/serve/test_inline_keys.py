"""Over HTTP, a key written in a spec (``rerank.api``'s ``api_key``, or a header of its ``user_headers`` that carries
one: ``X-Api-Key``, ``api-key``, ``Cookie``...) is refused where a client saves a flow
(``PUT /flows/{name}``) or runs one (``/v1/search``, ``/task/run``, ``/task/enqueue``, a mosaicRAG body, a step inside
``retrieve.multi_collection``): a 422 ``key_in_spec`` naming the field and ``api_key_env``. Before, the flow was saved
with the key in clear in its YAML (and ``GET /flows/{name}`` gave it back), and a task kept it in the task store's
``spec`` column. Neither the answer, nor the service's log, nor any file under ``$TESSERA_HOME`` holds the key. A spec
of one's own (Python, the CLI) still sends such headers. The service's FastAPI app under uvicorn on 127.0.0.1 (no Ray:
nothing runs)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
import requests

from tests.serve.conftest import api_on_localhost

KEY = "sk-inline-0123456789abcdef"
URL = "https://rerank.example.com/v1/rerank"
BM25 = {"op": "retrieve.bm25", "params": {"k": 5}}
KEYED = {"op": "rerank.api", "params": {"url": URL, "api_key": KEY}}


@pytest.fixture
def base(make_service, tmp_path):
    make_service()
    with api_on_localhost() as url:
        yield url


def files_holding(folder: Path, text: str) -> list[Path]:
    return [path for path in folder.rglob("*") if path.is_file() and text.encode() in path.read_bytes()]


def assert_refused_everywhere(base: str, body: dict, field: str, tmp_path: Path, caplog) -> None:
    """Each route that runs or saves ``body``'s flow answers a 422 ``key_in_spec`` naming ``field``, and nothing the
    service answers, keeps or logs holds ``KEY``."""
    routes = ("/task/run", "/task/enqueue") if "1" in body else ("/v1/search", "/task/run", "/task/enqueue")
    answers = [requests.post(base + route, json=body, timeout=60) for route in routes]  # /v1/search: native only
    spec = body["flow"] if "flow" in body else {k: v for k, v in body.items() if k != "query"}
    answers.append(requests.put(f"{base}/flows/keyed", json=spec, timeout=60))
    for answer in answers:
        error = answer.json()["error"]
        assert (answer.status_code, error["code"], error["param"]) == (422, "key_in_spec", field), answer.text
        assert error["message"].startswith(f"{field}: ") and "api_key_env" in error["message"], error
        assert KEY not in answer.text
    assert requests.get(f"{base}/tasks", timeout=30).json()["tasks"] == []
    assert requests.get(f"{base}/flows/keyed", timeout=30).status_code == 404
    assert files_holding(Path(os.environ["TESSERA_HOME"]), KEY) == files_holding(tmp_path, KEY) == []
    assert not [record for record in caplog.records if KEY in record.getMessage()]


@pytest.mark.parametrize("body, field", [
    ({"flow": {"steps": {"bm25": BM25, "rr": KEYED}}, "query": "honey"}, "steps.rr.params.api_key"),
    ({"query": "honey", "1": {"id": "bm25", "parameters": {"k": "5"}},
      "2": {"id": "api_rerank", "parameters": {"url": URL, "api_key": KEY}}}, "2.parameters.api_key"),
    ({"flow": {"steps": {"m": {"op": "retrieve.multi_collection", "params": {
        "collections": [{"name": "a", "index": "news"}], "postprocess": [KEYED]}}}}, "query": "honey"},
     "steps.m.params.postprocess.0.params.api_key"),
], ids=["native", "mosaic", "nested"])
def test_a_key_in_a_spec_is_refused_naming_the_field_and_kept_nowhere(base, body, field, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    assert_refused_everywhere(base, body, field, tmp_path, caplog)


@pytest.mark.parametrize("header", ["X-Api-Key", "api-key", "x-goog-api-key", "Cookie", "Proxy-Authorization",
                                    "X_API_KEY", "Ocp-Apim-Subscription-Key"])
def test_a_header_that_carries_a_key_is_refused_naming_it_and_kept_nowhere(base, header, tmp_path, caplog):
    """Before, ``PUT /flows`` saved it (201) and ``GET /flows/{name}`` gave the key back."""
    caplog.set_level(logging.DEBUG)
    headed = {"op": "rerank.api", "params": {"url": URL, "user_headers": {"X-OpenWebUI-User-Id": "u1", header: KEY}}}
    assert_refused_everywhere(base, {"flow": {"steps": {"bm25": BM25, "rr": headed}}, "query": "honey"},
                              f"steps.rr.params.user_headers.{header}", tmp_path, caplog)
    nested = {"op": "retrieve.multi_collection", "params": {"collections": [{"name": "a", "index": "news"}],
                                                            "postprocess": [headed]}}
    assert_refused_everywhere(base, {"flow": {"steps": {"m": nested}}, "query": "honey"},
                              f"steps.m.params.postprocess.0.params.user_headers.{header}", tmp_path, caplog)


def test_headers_that_carry_no_key_are_saved(base):
    """(A spec of one's own still sends a keyed one: tests/operators/rerank/test_api.py.)"""
    plain = {"op": "rerank.api", "params": {"url": URL, "user_headers": {"X-OpenWebUI-User-Id": "u1",
                                                                         "X-Api-Version": "2"}}}
    assert requests.put(f"{base}/flows/plain", json={"steps": {"bm25": BM25, "rr": plain}}, timeout=60).status_code \
        == 201
    assert requests.get(f"{base}/flows/plain", timeout=30).json()["steps"]["rr"]["params"]["user_headers"] == \
        {"X-OpenWebUI-User-Id": "u1", "X-Api-Version": "2"}


def test_a_key_from_an_allowed_variable_is_saved_by_its_name(base, monkeypatch):
    monkeypatch.setenv("TESSERA_ALLOW_ENV", "COHERE_API_KEY")
    spec = {"steps": {"bm25": BM25, "rr": {"op": "rerank.api", "params": {"url": URL,
                                                                          "api_key_env": "COHERE_API_KEY"}}}}
    assert requests.put(f"{base}/flows/named", json=spec, timeout=60).status_code == 201
    assert requests.get(f"{base}/flows/named", timeout=30).json()["steps"]["rr"]["params"]["api_key_env"] == \
        "COHERE_API_KEY"


def test_both_refusals_give_one_reason_in_the_same_words():
    """``key_in_spec`` words both refusals (a key param, a credential header): what differs is what is refused and
    what to leave out; why, and where the key goes instead, are the same sentence."""
    from operators.registry import get_operator
    from serve.http.errors import ApiError
    from serve.security.spec_guard import ALLOW_ENV, check_operator

    messages = []
    for params in ({"url": URL, "api_key": KEY}, {"url": URL, "user_headers": {"X-Api-Key": KEY}}):
        with pytest.raises(ApiError) as refused:
            check_operator(get_operator("rerank.api")(params, step_id="rr"), "steps.rr")
        messages.append(refused.value.message)
    reason = (": a saved flow or a task would keep it in clear; leave {} out, put the key in an environment variable "
              f"of the service that its operator lists in {ALLOW_ENV}, and name that variable with api_key_env")
    assert messages[0].endswith("this service takes no key written in a spec" + reason.format("api_key")), messages
    assert messages[1].endswith(reason.format("the header")), messages
    assert messages[1].startswith("steps.rr.params.user_headers.X-Api-Key: this service takes no credential in a "
                                  "spec's headers (it refuses api-key, authorization, cookie,"), messages
    assert KEY not in " ".join(messages)
