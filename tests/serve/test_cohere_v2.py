"""Cohere v2 ``/v2/rerank`` with the real ``cohere.ClientV2``, v1 ``/v1/rerank`` with ``cohere.Client``, and
serve/config.yaml's embedding reranker, which needs no training, reranking in the config's own app."""

from __future__ import annotations

import numpy as np
import pytest
import requests
import yaml

from operators import create
from operators.testing import SAMPLE_QUERIES, sample_documents

pytestmark = pytest.mark.ray

QUERY = SAMPLE_QUERIES["q1"]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return sample_documents(6).column("text").to_pylist()


def scores(op: str, params: dict, texts: list[str]) -> np.ndarray:
    """The operator's own scores in-process, for comparison."""
    reranker = create(op, params)
    reranker.ensure_setup()
    return reranker.score_texts(QUERY, texts)


def test_the_cohere_v2_client_reranks(serve_app, ce_path, texts):
    import cohere

    client = cohere.ClientV2(api_key="x", base_url=serve_app)
    response = client.rerank(model="tessera-cross-encoder", query=QUERY, documents=texts, top_n=3,
                             max_tokens_per_doc=512)
    expected = scores("rerank.cross_encoder", {"model": ce_path}, texts)
    best = np.argsort(-expected, kind="stable")[:3]
    assert [r.index for r in response.results] == best.tolist()
    np.testing.assert_allclose([r.relevance_score for r in response.results], expected[best], atol=1e-5)
    assert response.id and response.meta.api_version.version == "2"
    assert response.meta.billed_units.search_units == 1 and response.meta.tokens.input_tokens > 0


def test_a_v2_rerank_that_asks_for_the_documents_gets_them(serve_app, texts):
    """litellm's cohere route posts ``return_documents`` to /v2/rerank (Cohere v2 dropped it) and reads each result's
    document; it was ignored, so litellm's user got none."""
    body = {"model": "tessera-cross-encoder", "query": QUERY, "documents": texts, "top_n": 2, "return_documents": True}
    results = requests.post(serve_app + "/v2/rerank", json=body, timeout=60).json()["results"]
    assert [r["document"] for r in results] == [{"text": texts[r["index"]]} for r in results]
    plain = requests.post(serve_app + "/v2/rerank", json={**body, "return_documents": False}, timeout=60).json()
    assert [r["index"] for r in plain["results"]] == [r["index"] for r in results]
    assert all("document" not in r for r in plain["results"])


def test_the_cohere_v1_client_reranks_through_v1_rerank(serve_app, ce_path, texts):
    """``cohere.Client`` (the v1 API) posts to ``/v1/rerank`` with its own fields (``return_documents``...)."""
    import cohere

    client = cohere.Client(api_key="x", base_url=serve_app)
    response = client.rerank(model="tessera-cross-encoder", query=QUERY, documents=texts, top_n=2,
                             return_documents=True)
    expected = scores("rerank.cross_encoder", {"model": ce_path}, texts)
    best = np.argsort(-expected, kind="stable")[:2]
    assert [r.index for r in response.results] == best.tolist()
    assert [r.document.text for r in response.results] == [texts[i] for i in best]
    with pytest.raises(cohere.errors.NotFoundError):
        client.rerank(model="rerank-english-v3.0", query=QUERY, documents=["d"])


def test_the_cohere_v2_client_gets_errors_it_can_read(serve_app):
    import cohere

    client = cohere.ClientV2(api_key="x", base_url=serve_app)
    with pytest.raises(cohere.errors.NotFoundError) as err:
        client.rerank(model="rerank-v3.5", query=QUERY, documents=["d"])
    assert "rerank-v3.5" in err.value.body["error"]["message"]


@pytest.mark.parametrize("body, field", [
    ({"query": "q", "documents": [{"text": "d"}]}, "documents.0"),  # v2 takes strings only
    ({"query": "q", "documents": ["d"], "relevant_spans": {"threshold": 0.5}}, "relevant_spans"),
    ({"query": "q", "documents": ["d"], "top_n": 0}, "top_n"),
    ({"documents": ["d"]}, "query"),
])
def test_bad_v2_bodies_name_the_field(serve_app, body, field):
    response = requests.post(serve_app + "/v2/rerank", json={"model": "tessera-cross-encoder", **body}, timeout=60)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["param"] == field


@pytest.fixture
def config_app(serve_app, repo_root, tmp_path, monkeypatch):
    """serve/config.yaml's application, as `serve run` builds it on a fresh install (no trained models), under
    its own name and route; each replica's CPUs scaled down to fit beside the package's app on two cores."""
    from ray import serve

    from serve.app import build_app

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    config = yaml.safe_load((repo_root / "serve" / "config.yaml").read_text(encoding="utf-8"))
    (application,) = config["applications"]
    args = application["args"]
    args["api_deployment"] = "config-api"
    for model in args["models"] + args.get("llms", []):
        model["num_cpus"] = 0.05  # 3 replicas beside the package app's 1.75 CPUs: at 0.1 each, 2.05 of 2 never fit
    serve.run(build_app(args), name="config", route_prefix="/config")
    try:
        yield serve_app + "/config"
    finally:
        serve.delete("config")


@pytest.mark.slow
def test_the_config_file_app_reranks_without_training(config_app, texts):
    import cohere

    cards = {c["id"]: c["status"] for c in requests.get(config_app + "/v1/models", timeout=30).json()["data"]}
    assert cards["minilm-rerank"] == "ready" and cards["tessera-cross-encoder"] == "missing"
    response = cohere.ClientV2(api_key="x", base_url=config_app).rerank(model="minilm-rerank", query=QUERY,
                                                                        documents=texts)
    expected = scores("rerank.embedding", {}, texts)
    assert [r.index for r in response.results] == np.argsort(-expected, kind="stable").tolist()
    np.testing.assert_allclose([r.relevance_score for r in response.results],
                               np.sort(expected)[::-1], atol=1e-5)
