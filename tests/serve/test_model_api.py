"""The Serve app over real HTTP on localhost: OpenAI embeddings, Cohere/Jina rerank, model list, errors,
request batching, and flow steps placed on the deployments (same output as in-process)."""

from __future__ import annotations

import base64
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import requests

from operators import create
from operators.testing import SAMPLE_QUERIES, sample_documents, sample_results

pytestmark = pytest.mark.ray

QUERY = SAMPLE_QUERIES["q1"]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return sample_documents(6).column("text").to_pylist()


@pytest.fixture(scope="module")
def embedder():
    op = create("embed.sentence_transformer", {})
    op.ensure_setup()
    return op


@pytest.fixture(scope="module")
def cross_encoder(ce_path):
    op = create("rerank.cross_encoder", {"model": ce_path})
    op.ensure_setup()
    return op


def post(base: str, path: str, body: dict) -> requests.Response:
    return requests.post(base + path, json=body, timeout=120)


# -- /v1/models --------------------------------------------------------------------


def test_models_lists_served_and_missing_models(serve_app):
    cards = {card["id"]: card for card in requests.get(serve_app + "/v1/models", timeout=30).json()["data"]}
    assert cards["all-MiniLM-L6-v2"]["type"] == "embedding" and cards["all-MiniLM-L6-v2"]["status"] == "ready"
    assert cards["tessera-cross-encoder"]["type"] == "rerank" and cards["tessera-cross-encoder"]["status"] == "ready"
    assert cards["absent-ce"]["status"] == "missing"
    assert "no-such-model-anywhere" in cards["absent-ce"]["reason"]
    response = post(serve_app, "/v1/rerank", {"model": "absent-ce", "query": "q", "documents": ["d"]})
    assert response.status_code == 404 and "no-such-model-anywhere" in response.json()["error"]["message"]
    home = os.environ["TESSERA_HOME"]  # the model repository is named, not where it is on the server
    assert "the model repository ($TESSERA_HOME/models)" in response.json()["error"]["message"]
    assert home not in response.text and home not in cards["absent-ce"]["reason"]


# -- /v1/embeddings ----------------------------------------------------------------


def test_embeddings_equal_the_operator_in_process(serve_app, embedder, texts):
    body = post(serve_app, "/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": texts}).json()
    assert body["object"] == "list" and body["model"] == "all-MiniLM-L6-v2"
    assert [d["index"] for d in body["data"]] == list(range(len(texts)))
    assert all(d["object"] == "embedding" for d in body["data"])
    served = np.array([d["embedding"] for d in body["data"]], dtype=np.float32)
    np.testing.assert_allclose(served, embedder.encode(texts), atol=1e-5)
    tokens = sum(len(ids) for ids in embedder._model.tokenizer(texts, truncation=True,
                                                               max_length=embedder._model.max_seq_length)["input_ids"])
    assert body["usage"] == {"prompt_tokens": tokens, "total_tokens": tokens}

    one = post(serve_app, "/v1/embeddings", {"model": "minilm", "input": texts[0], "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(one["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(decoded, served[0], atol=1e-5)


def test_the_openai_client_works_unmodified(serve_app, embedder, texts):
    from openai import OpenAI

    client = OpenAI(base_url=serve_app + "/v1", api_key="x")
    response = client.embeddings.create(model="all-MiniLM-L6-v2", input=texts[:3])
    vectors = np.array([item.embedding for item in response.data], dtype=np.float32)
    np.testing.assert_allclose(vectors, embedder.encode(texts[:3]), atol=1e-5)
    assert response.usage.total_tokens > 0
    assert "all-MiniLM-L6-v2" in {model.id for model in client.models.list()}


def test_token_ids_are_embedded_as_the_text_they_encode(serve_app, embedder, texts):
    """LangChain's OpenAIEmbeddings sends each text as its cl100k_base token ids (tiktoken's encoding for a model name
    it does not know): read back as the text, they embed as the text does, one array or a list of them."""
    import tiktoken

    from serve import token_ids

    token_ids.decode([0])  # litellm's bundled encoding file as tiktoken's cache (this process is offline too)
    ids = tiktoken.get_encoding("cl100k_base").encode_ordinary_batch(texts[:3])
    many = post(serve_app, "/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": ids}).json()
    one = post(serve_app, "/v1/embeddings", {"model": "minilm", "input": ids[0]}).json()
    vectors = np.array([d["embedding"] for d in many["data"] + one["data"]], dtype=np.float32)
    np.testing.assert_allclose(vectors, embedder.encode([*texts[:3], texts[0]]), atol=1e-5)


# -- /v1/rerank --------------------------------------------------------------------


def test_rerank_cohere_body_equals_cross_encoder_predict(serve_app, cross_encoder, texts):
    import torch

    body = post(serve_app, "/v1/rerank", {"model": "tessera-cross-encoder", "query": QUERY, "documents": texts,
                                          "top_n": 3, "return_documents": True}).json()
    expected = cross_encoder.model.predict([(QUERY, t) for t in texts], activation_fn=torch.nn.Identity(),
                                           convert_to_numpy=True)
    best = np.argsort(-expected, kind="stable")[:3]
    assert [r["index"] for r in body["results"]] == best.tolist()
    np.testing.assert_allclose([r["relevance_score"] for r in body["results"]], expected[best], atol=1e-5)
    assert [r["document"]["text"] for r in body["results"]] == [texts[i] for i in best]
    assert body["model"] == "tessera-cross-encoder" and body["usage"]["total_tokens"] > 0


def test_a_rerank_of_more_texts_than_one_part_scores_each_as_one_call_would(serve_app, cross_encoder, texts):
    """Scored ``FAIR_SHARE`` (64) texts at a time, the parts' scores and tokens add up to one call's."""
    import torch

    many = [f"{i}. {texts[i % len(texts)]}" for i in range(70)]  # a part of 64 and one of 6
    body = post(serve_app, "/v1/rerank", {"model": "tessera-cross-encoder", "query": QUERY, "documents": many,
                                          "top_n": 70}).json()
    expected = cross_encoder.model.predict([(QUERY, t) for t in many], activation_fn=torch.nn.Identity(),
                                           convert_to_numpy=True)
    scores = dict((r["index"], r["relevance_score"]) for r in body["results"])
    np.testing.assert_allclose([scores[i] for i in range(70)], expected, atol=1e-5)
    pairs = cross_encoder.model.tokenizer([QUERY] * 70, many, truncation=True)["input_ids"]
    assert body["usage"]["total_tokens"] == sum(len(ids) for ids in pairs)


def test_rerank_jina_body_with_document_objects(serve_app, cross_encoder, texts):
    body = post(serve_app, "/v1/rerank", {"model": "tessera-cross-encoder", "query": QUERY,
                                          "documents": [{"text": t} for t in texts], "truncation": True}).json()
    scores = [r["relevance_score"] for r in body["results"]]
    assert scores == sorted(scores, reverse=True) and len(scores) == len(texts)
    assert "document" not in body["results"][0]
    expected = cross_encoder.score_texts(QUERY, texts)
    np.testing.assert_allclose([expected[r["index"]] for r in body["results"]], scores, atol=1e-5)


def test_the_cohere_v1_client_s_rank_fields_pick_what_is_ranked(serve_app, cross_encoder, texts):
    """Cohere v1's ``rank_fields`` was ignored: documents without ``text`` were refused, and ones with it ranked by it
    whatever fields were named. Ranked by the fields named, their values one a line; echoed as sent."""
    import cohere

    client = cohere.Client(api_key="unused", base_url=serve_app)
    documents = [{"title": text[:60], "body": text, "id": n} for n, text in enumerate(texts)]
    for fields in (["title"], ["title", "body"]):
        answer = client.rerank(model="tessera-cross-encoder", query=QUERY, documents=documents, rank_fields=fields,
                               return_documents=True)
        expected = cross_encoder.score_texts(QUERY, ["\n".join(d[f] for f in fields) for d in documents])
        np.testing.assert_allclose([expected[r.index] for r in answer.results],
                                   [r.relevance_score for r in answer.results], atol=1e-5)
        shown = [r.document.model_dump(exclude_none=True) for r in answer.results]  # the client's model adds text
        assert shown == [documents[r.index] for r in answer.results]
    refused = post(serve_app, "/v1/rerank", {"model": "tessera-cross-encoder", "query": QUERY, "documents": documents,
                                             "rank_fields": ["author"]})
    assert refused.status_code == 422 and "'author'" in refused.json()["error"]["message"], refused.text


def test_the_external_rerank_client_through_tesseras_own_endpoint(serve_app, ce_path):
    """rerank.api (the Cohere-format client, retries and splitting included) against /v1/rerank over HTTP ranks
    as rerank.cross_encoder does in-process."""
    results = sample_results(3, 8)
    in_process = create("rerank.cross_encoder", {"model": ce_path, "n": 6}, step_id="rr")(results)
    remote_op = create("rerank.api", {"url": serve_app + "/v1/rerank", "model": "tessera-cross-encoder", "n": 6,
                                      "max_documents_per_request": 4, "timeout": 120}, step_id="rr")
    remote = remote_op(results)
    assert remote_op.drain_metadata() == {}, "no query may have fallen back to the first stage"
    columns = ["qid", "docno", "rank", "rank_rr"]
    assert remote.select(columns).equals(in_process.select(columns))
    np.testing.assert_allclose(remote["score_rr"].to_numpy(zero_copy_only=False),
                               in_process["score_rr"].to_numpy(zero_copy_only=False), atol=1e-5)


def test_rerank_of_no_documents_is_an_empty_result(serve_app):
    response = post(serve_app, "/v1/rerank", {"model": "tessera-cross-encoder", "query": QUERY, "documents": []})
    assert response.status_code == 200 and response.json()["results"] == []


@pytest.mark.parametrize("path", ["/v1/rerank", "/v2/rerank"])
def test_rerank_ranks_an_empty_document_and_top_n_over_the_list_gives_all(serve_app, texts, path):
    """What Cohere answers too: top_n past the end is every document; an empty document is one to rank (rerank.api
    sends one for a row without text), so it gets a score among the others instead of failing the request."""
    body = post(serve_app, path, {"model": "tessera-cross-encoder", "query": QUERY, "documents": [*texts[:2], ""],
                                  "top_n": 10}).json()
    assert sorted(r["index"] for r in body["results"]) == [0, 1, 2]


@pytest.mark.parametrize("path, body, status, field", [
    ("/v1/embeddings", {"model": "all-MiniLM-L6-v2"}, 422, "input"),
    ("/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": [[101, 200_000]]}, 422, "input"),  # not cl100k's
    ("/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": ["bees", [101]]}, 422, "input"),
    ("/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": []}, 422, "input"),
    ("/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": ["bees", " "]}, 422, "input"),  # "text 1 is empty"
    ("/v2/embed", {"model": "all-MiniLM-L6-v2", "texts": [""], "input_type": "search_query"}, 422, "texts"),
    ("/v2/embed", {"model": "all-MiniLM-L6-v2", "inputs": [{"content": [{"type": "text", "text": " "}]}],
                   "input_type": "search_query"}, 422, "inputs"),
    ("/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": "x", "encoding_format": "int8"}, 422,
     "encoding_format"),
    ("/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": "x", "dimensions": 128}, 422, "dimensions"),
    ("/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": "x", "colour": "red"}, 422, "colour"),
    ("/v1/embeddings", {"model": "text-embedding-3-small", "input": "x"}, 404, "model"),
    ("/v1/embeddings", {"model": "tessera-cross-encoder", "input": "x"}, 404, "model"),
    ("/v1/rerank", {"model": "tessera-cross-encoder", "documents": ["d"]}, 422, "query"),
    ("/v1/rerank", {"model": "tessera-cross-encoder", "query": "q", "documents": "d"}, 422, "documents"),
    ("/v1/rerank", {"model": "tessera-cross-encoder", "query": "q", "documents": [{"title": "t"}]}, 422,
     "documents"),
    ("/v1/rerank", {"model": "tessera-cross-encoder", "query": "q", "documents": ["d"], "top_n": 0}, 422, "top_n"),
    ("/v1/rerank", {"model": "tessera-cross-encoder", "query": "q", "documents": ["d"], "top_n": -2}, 422, "top_n"),
    ("/v1/rerank", {"model": "tessera-cross-encoder", "query": "", "documents": ["d"]}, 422, "query"),
    ("/v1/rerank", {"model": "tessera-cross-encoder", "query": " \n\t", "documents": ["d"]}, 422, "query"),
    ("/v2/rerank", {"model": "tessera-cross-encoder", "query": "  ", "documents": ["d"]}, 422, "query"),
    ("/v1/rerank", {"model": "rerank-english-v3.0", "query": "q", "documents": ["d"]}, 404, "model"),
    # a cut shorter than the model reads was ignored: the texts were read whole (tests/serve/test_cohere_cuts.py)
    ("/v2/rerank", {"model": "tessera-cross-encoder", "query": "q", "documents": ["d"], "max_tokens_per_doc": 5},
     422, "max_tokens_per_doc"),
    ("/v2/embed", {"model": "all-MiniLM-L6-v2", "texts": ["x"], "input_type": "search_query", "max_tokens": 5}, 422,
     "max_tokens"),
])
def test_bad_requests_name_the_field(serve_app, path, body, status, field):
    response = post(serve_app, path, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == field and field in error["message"]
    if status == 404:
        assert body["model"] in error["message"]


# -- batching ---------------------------------------------------------------------


def test_concurrent_requests_are_batched_into_fewer_model_calls(serve_app, texts):
    from ray import serve

    for deployment, call in (("all-MiniLM-L6-v2", lambda h, t: h.embed.remote([t])),
                             ("tessera-cross-encoder", lambda h, t: h.score.remote(QUERY, [t]))):
        handle = serve.get_deployment_handle(deployment, app_name="tessera")
        before = handle.info.remote().result()
        responses = [call(handle, texts[i % len(texts)]) for i in range(8)]
        [r.result() for r in responses]
        after = handle.info.remote().result()
        calls = after["model_calls"] - before["model_calls"]
        assert after["requests"] - before["requests"] == 8
        assert calls < 8, f"{deployment}: 8 concurrent requests took {calls} model calls"
        assert max(after["batch_sizes"][len(before["batch_sizes"]):]) > 1
        assert (after["max_batch_size"], after["batch_wait_timeout_s"]) == (8, 0.05)  # the user_config applied


def test_a_replica_says_where_its_model_runs(serve_app):
    """The device its model sits on and the GPUs Ray gave it: none on this machine (a replica asks for one with
    ``num_gpus``; benchmarks/gpu_ray.py reads the same two fields on a GPU)."""
    from ray import serve

    info = serve.get_deployment_handle("all-MiniLM-L6-v2", app_name="tessera").info.remote().result()
    assert (info["device"], info["gpu_ids"]) == ("cpu", [])


def test_concurrent_http_requests_each_get_their_own_vectors(serve_app, embedder, texts):
    def embed(text):
        return post(serve_app, "/v1/embeddings", {"model": "all-MiniLM-L6-v2", "input": [text]}).json()

    with ThreadPoolExecutor(6) as pool:
        bodies = list(pool.map(embed, texts))
    served = np.array([b["data"][0]["embedding"] for b in bodies], dtype=np.float32)
    np.testing.assert_allclose(served, embedder.encode(texts), atol=1e-5)


def test_a_large_request_does_not_hold_the_embedder_while_a_small_one_waits(serve_app, embedder):
    """One request of many texts is encoded a part at a time (``FAIR_SHARE``), each part queued behind what other
    clients sent meanwhile: a one-word request sent while its first part is encoded is answered first. Before, a
    request of 2,048 texts held the replica for minutes while another key's request waited behind it. Its vectors are
    those of one encode. Through the deployment's handle: over HTTP the large answer's JSON took longer than the
    encode."""
    import time

    from ray import serve

    handle = serve.get_deployment_handle("all-MiniLM-L6-v2", app_name="tessera")
    big = [f"{i}: honey bees collect nectar from flowers, carry it back and make honey in the hive " * 4
           for i in range(192)]  # three parts: the one-word request comes while the first or second is encoded
    ended = {}

    def embed(name, texts):
        vectors = handle.embed.remote(texts).result()["vectors"]
        ended[name] = time.monotonic()
        return vectors

    calls = handle.info.remote().result()["model_calls"]
    with ThreadPoolExecutor(2) as pool:
        large = pool.submit(embed, "large", big)
        while handle.info.remote().result()["model_calls"] == calls:  # not a fixed wait: a fast machine's 0.5 s
            assert not large.done(), large.result()                   # was the whole request
        small = pool.submit(embed, "small", ["bees"])
        served = large.result()
        small.result()
    assert ended["small"] < ended["large"], "the one-word request waited for the whole large one"
    assert served.shape == (192, 384)
    np.testing.assert_allclose(served[60:70], embedder.encode(big[60:70]), atol=1e-5)  # across a part's end


# -- placement ---------------------------------------------------------------------


def placed_spec(ce_path: str, colbert_path: str, placed: bool):
    from flows.spec import FlowSpec

    def where(deployment):
        return {"placement": {"deployment": deployment, "app": "tessera"}} if placed else {}

    steps = {
        "emb": {"op": "embed.sentence_transformer", "params": {"title_column": "title"}, **where("all-MiniLM-L6-v2")},
        "ce": {"op": "rerank.cross_encoder", "params": {"model": ce_path, "n": 4}, **where("tessera-cross-encoder")},
        "cb": {"op": "rerank.colbert", "params": {"model": colbert_path, "n": 5}, **where("tessera-colbert")},
    }
    return FlowSpec.parse({"name": "embed-rerank", "steps": steps})


def test_a_flow_placed_on_serve_gives_the_in_process_output(serve_app, ce_path, colbert_path):
    from flows.executors.local import LocalExecutor

    placed_executor = LocalExecutor()

    from ray import serve

    deployments = ["all-MiniLM-L6-v2", "tessera-cross-encoder", "tessera-colbert"]

    def served_requests():
        return [serve.get_deployment_handle(d, app_name="tessera").info.remote().result()["requests"]
                for d in deployments]

    results = sample_results(3, 6)
    local = LocalExecutor().run(placed_spec(ce_path, colbert_path, placed=False), results)
    before = served_requests()
    placed = placed_executor.run(placed_spec(ce_path, colbert_path, placed=True), results)
    after = served_requests()
    # one embed request (18 texts) and one request per query on each reranker: the models ran on Serve
    assert [a - b for a, b in zip(after, before)] == [1, 3, 3]
    assert placed.table.num_rows == results.num_rows and "rank_ce" in placed.table.column_names
    # Identical rows and ranks. Serve merges the three queries' requests into one model call
    # (@serve.batch), so the rerankers see other batch shapes (padding, matrix sizes) than the in-process
    # step, and the replica's torch runs on its own thread count (one per CPU it holds), so scores and
    # vectors may differ in the last float bits (1.5e-8 seen for the cross-encoder), never the ranking.
    approximate = ["score", "score_ce", "score_cb"]
    np.testing.assert_allclose(np.stack(placed.table.column("vector").to_numpy(zero_copy_only=False)),
                               np.stack(local.table.column("vector").to_numpy(zero_copy_only=False)),
                               rtol=0, atol=1e-6)
    exact = [c for c in local.table.column_names if c not in approximate and c != "vector"]
    assert placed.table.column_names == local.table.column_names
    differ = [c for c in exact if not placed.table.column(c).equals(local.table.column(c))]
    assert not differ, f"the placed flow's output differs in {differ}"
    for column in approximate:
        np.testing.assert_allclose(placed.table.column(column).to_numpy(zero_copy_only=False),
                                   local.table.column(column).to_numpy(zero_copy_only=False), rtol=1e-6, atol=1e-6)
    assert placed.metadata == local.metadata


def test_a_placed_step_keeps_the_in_process_cache_key(serve_app, ce_path):
    from flows.cache import step_key
    from flows.placement import place

    for op, deployment in ((create("rerank.cross_encoder", {"model": ce_path, "n": 4}, step_id="ce"),
                            "tessera-cross-encoder"),
                           (create("embed.sentence_transformer", {"title_column": "title"}, step_id="emb"),
                            "all-MiniLM-L6-v2")):
        proxy = place(op, deployment=deployment)
        assert proxy.name == op.name and proxy.produces() == op.produces()
        assert step_key(proxy) == step_key(op)


def test_placement_errors_name_the_step_and_deployment(serve_app, ce_path):
    from flows.executors.local import LocalExecutor
    from flows.spec import FlowSpec
    from flows.placement import PlacementError

    def run(step):
        return LocalExecutor().run(FlowSpec.parse({"steps": {"ce": step}}), sample_results(1, 3))

    with pytest.raises(PlacementError, match="ce.*tessera/no-such-deployment"):
        run({"op": "rerank.cross_encoder", "params": {"model": ce_path},
             "placement": {"deployment": "no-such-deployment"}})
    with pytest.raises(PlacementError, match="max_length") as err:
        run({"op": "rerank.cross_encoder", "params": {"model": ce_path, "max_length": 64},
             "placement": {"deployment": "tessera-cross-encoder"}})
    assert err.value.step == "ce" and err.value.field == "params.max_length"
    with pytest.raises(PlacementError, match="hosts 'embed.sentence_transformer'"):
        run({"op": "rerank.cross_encoder", "params": {"model": ce_path},
             "placement": {"deployment": "all-MiniLM-L6-v2"}})

    # Over HTTP, a step that asks for another model than its deployment runs is the request's mistake: a 422.
    refused = requests.post(f"{serve_app}/v1/search", json={"query": "bees", "flow": {"steps": {
        "bm25": {"op": "retrieve.bm25", "params": {"k": 5}},
        "ce": {"op": "rerank.cross_encoder", "params": {"model": "tessera-cross-encoder"},
               "placement": {"deployment": "tessera-cross-encoder"}}}}}, timeout=120)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "flow_not_runnable"
    assert refused.json()["error"]["param"] == "params.model" and "the step asks for model" in refused.text


# -- ColBERT ----------------------------------------------------------------------


def test_colbert_through_serve_equals_the_operator(serve_app, colbert_path, texts):
    body = post(serve_app, "/v1/rerank", {"model": "tessera-colbert", "query": QUERY, "documents": texts}).json()
    op = create("rerank.colbert", {"model": colbert_path})
    op.ensure_setup()
    scores = op.score_texts(QUERY, texts)
    np.testing.assert_allclose([r["relevance_score"] for r in body["results"]],
                               [scores[r["index"]] for r in body["results"]], atol=1e-5)


@pytest.mark.slow
def test_a_language_model_step_placed_on_the_llm_deployment_answers_as_in_process(serve_app):
    """generate.answer with model local on the smollm2 deployment (llama.cpp, the same GGUF): the same answer and
    usage as in-process, streamed through the deployment when a chat waits; the cache key unchanged."""
    from ray import serve

    from flows.cache import step_key
    from flows.placement import place
    from operators.generate.answer_stream import streaming_answers

    def answer_step(**params):
        return create("generate.answer", {"model": "local", "max_tokens": 24, **params}, step_id="answer")

    def requests_served():
        return serve.get_deployment_handle("smollm2", app_name="tessera").info.remote().result()["requests"]

    table = create("generate.context", {"max_context_length": 300})(sample_results(2, 3))
    local = answer_step()
    local(table)
    expected = local.drain_metadata()
    before = requests_served()
    proxy = place(answer_step(), deployment="smollm2")
    got: list[str] = []
    with streaming_answers(lambda qid, text: got.append(text)):
        proxy(table)
    placed = proxy.drain_metadata()
    assert requests_served() - before == 2 and got  # one call per query, on the deployment, streamed
    for qid in ("q1", "q2"):
        assert placed[qid]["answer"] == expected[qid]["answer"] and placed[qid]["sources"] == expected[qid]["sources"]
        tokens = ("prompt_tokens", "completion_tokens")
        assert [placed[qid]["usage"]["answer"][k] for k in tokens] == [expected[qid]["usage"]["answer"][k]
                                                                        for k in tokens]
    short = place(answer_step(style="short"), deployment="smollm2")  # whole answers, not streamed
    short(table)
    assert short.drain_metadata()["q1"]["answer"] and step_key(short) == step_key(answer_step(style="short"))


@pytest.mark.slow
def test_an_llm_judge_placed_on_the_llm_deployment_keeps_its_grammar(serve_app):
    """rerank.llm_tournament with model local on the smollm2 deployment: its calls carry the judge's grammar there
    as in-process (unconstrained, SmolLM2 wrote prose and named no candidate), so every call names one and the
    bracket is the in-process one."""
    from flows.placement import place

    def judge():
        return create("rerank.llm_tournament", {"model": "local", "max_chars": 120, "temperature": 0},
                      step_id="t")

    table = sample_results(1, 4)
    local = judge()
    expected = local(table)
    local.drain_metadata()
    proxy = place(judge(), deployment="smollm2")
    placed = proxy(table)
    metadata = proxy.drain_metadata()["q1"]
    assert "degraded" not in metadata, metadata.get("degraded")
    assert placed["docno"].to_pylist() == expected["docno"].to_pylist()


def test_a_language_model_step_on_another_model_is_refused(serve_app):
    from flows.placement import PlacementError, place

    with pytest.raises(PlacementError) as err:
        place(create("generate.answer", {"model": "gemma2"}, step_id="answer"), deployment="smollm2")
    assert err.value.field == "params.model" and "smollm2-135m-instruct" in err.value.message
    with pytest.raises(PlacementError, match="not a language model"):
        place(create("generate.answer", {}, step_id="answer"), deployment="all-MiniLM-L6-v2")
