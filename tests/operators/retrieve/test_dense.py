"""retrieve.dense over an on-disk index: the contract, the index's encoder, filters, the hybrid flow."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from operators.errors import OperatorError
from operators.registry import create
from operators.testing import SAMPLE_QUERIES, OperatorContract, sample_documents
from operators.testing import sample_queries as queries
from tests.conftest import bm25_sample_index

COUNTRIES = ["FR", "DE", "JP", "US", "BR"]
N_DOCS = 80  # the first 80 sample docs (Bee is the 80th), texts cut to 400 characters: quick to embed


@pytest.fixture(scope="module")
def dense_index(tmp_path_factory):
    """Sample docs embedded as ingestion does (title + ". " + text), with metadata."""
    from operators.store import Index, IndexSettings

    docs = short_documents()
    docs = (docs.append_column("doc_id", docs.column("docno"))
                .append_column("year", pa.array([1990 + i % 30 for i in range(N_DOCS)], pa.int64()))
                .append_column("country", pa.array([COUNTRIES[i % 5] for i in range(N_DOCS)])))
    chunks = create("embed.sentence_transformer", {"title_column": "title"})(docs)
    path = tmp_path_factory.mktemp("dense") / "sample"
    index = Index.create(path, IndexSettings())  # dense + BM25, MiniLM, 384-d, flat
    index.commit([index.write_shard("a", chunks.slice(0, 50)), index.write_shard("b", chunks.slice(50))])
    return path


def short_documents() -> pa.Table:
    docs = sample_documents(N_DOCS)
    return docs.set_column(docs.column_names.index("text"), "text",
                           pc.utf8_slice_codeunits(docs.column("text"), 0, 400))


@pytest.mark.integration
class TestDenseContract(OperatorContract):
    operator_name = "retrieve.dense"

    @pytest.fixture(autouse=True)
    def _index(self, dense_index):
        self.index = str(dense_index)

    def make_operator(self, **params):
        return create("retrieve.dense", {"index": self.index, "k": 5, **params}, step_id="dense")

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return queries(n_queries)


@pytest.mark.integration
def test_scores_are_cosine_similarities_with_the_index_encoder(dense_index):
    out = create("retrieve.dense", {"index": str(dense_index), "k": 3}, step_id="d")(pa.table({
        "qid": ["bees"], "query": ["which insects make honey and pollinate flowers"]}))
    assert out.column("title").to_pylist()[0] == "Bee"
    # The same numbers by hand: the query and the doc embedded with MiniLM, inner product.
    from operators.models import load_sentence_transformer

    model = load_sentence_transformer("all-MiniLM-L6-v2")
    bee = next(r for r in short_documents().to_pylist() if r["docno"] == out.column("docno")[0].as_py())
    q, d = model.encode(["which insects make honey and pollinate flowers", f"{bee['title']}. {bee['text']}"],
                        normalize_embeddings=True)
    assert out.column("score")[0].as_py() == pytest.approx(float(np.dot(q, d)), abs=1e-4)
    assert out.column("rank_d").to_pylist() == [1, 2, 3]


@pytest.mark.integration
def test_pre_filter_returns_k_rare_matches_and_post_only_matches(dense_index):
    flt = {"field": "year", "eq": 2001, "country": "DE"}  # i % 30 == 11 and i % 5 == 1: 3 of 80 docs
    pre = create("retrieve.dense", {"index": str(dense_index), "k": 3, "filter": flt})(queries(3))
    post = create("retrieve.dense", {"index": str(dense_index), "k": 3, "filter": flt, "filter_mode": "post",
                                     "expand_factor": 2})(queries(3))
    for out in (pre, post):
        assert all(r["year"] == 2001 and r["country"] == "DE" for r in out.to_pylist())
    for qid in SAMPLE_QUERIES:
        assert sum(1 for q in pre.column("qid").to_pylist() if q == qid) == 3  # dense ranks every match
    assert post.num_rows < pre.num_rows


def test_a_bm25_only_index_is_refused_with_a_hint(tmp_path):
    bm25_sample_index(tmp_path / "sparse", 5)
    with pytest.raises(OperatorError) as err:
        create("retrieve.dense", {"index": str(tmp_path / "sparse")}, step_id="d")(queries(1))
    assert err.value.field == "params.index" and "retrieve.bm25" in err.value.message


@pytest.mark.integration
def test_the_builtin_hybrid_flow_fuses_both_retrievers(dense_index):
    from flows.executors.local import LocalExecutor
    from flows.spec import FlowSpec

    spec = FlowSpec.load("hybrid")
    for step in ("bm25", "dense"):
        spec.steps[step].params["index"] = str(dense_index)
    result = LocalExecutor().run(spec, queries(3))
    out = result.table
    keys = list(zip(out.column("qid").to_pylist(), out.column("docno").to_pylist()))
    assert len(keys) == len(set(keys))
    bm25, dense = result.history["bm25"], result.history["dense"]
    assert set(keys) == set(zip(bm25.column("qid").to_pylist(), bm25.column("docno").to_pylist())) | set(
        zip(dense.column("qid").to_pylist(), dense.column("docno").to_pylist()))
    top = {r["qid"]: r for r in out.to_pylist() if r["rank"] == 1}
    assert top["q1"]["title"] == "Bee" and top["q1"]["rank_bm25"] == 1 and top["q1"]["rank_dense"] == 1


@pytest.mark.ray
def test_retrievers_with_filters_and_fusion_give_the_local_table_on_ray_data(dense_index, ray_session):
    """Index retrievers inside Ray Data actors (each opens the index where it lands) give the local
    executor's rows, scores and ranks, branch by branch, with a pre filter on one branch and a post
    filter on the other."""
    from flows.executors.local import LocalExecutor
    from flows.executors.ray_data import RayDataExecutor
    from flows.spec import FlowSpec

    spec = FlowSpec.parse({"name": "filtered_hybrid", "steps": {
        "bm25": {"op": "retrieve.bm25", "params": {"index": str(dense_index), "k": 20,
                                                   "filter": {"country": ["FR", "DE"]}}},
        "dense": {"op": "retrieve.dense", "inputs": [], "params": {
            "index": str(dense_index), "k": 20, "filter": {"field": "year", "gte": 2000}, "filter_mode": "post"}},
        "fused": {"op": "fuse.rrf", "inputs": ["bm25", "dense"]},
        "top": {"op": "postprocess.reduce", "params": {"k": 5}},
    }})
    local = LocalExecutor().run(spec, queries(4))
    on_ray = RayDataExecutor().run(spec, queries(4))
    assert on_ray.executor == "ray" and local.table.num_rows > 0
    for step in ("bm25", "dense", "fused", "top"):
        assert on_ray.history[step].equals(local.history[step]), step
    assert set(local.history["bm25"].column("country").to_pylist()) <= {"FR", "DE"}
    assert min(local.history["dense"].column("year").to_pylist()) >= 2000


def test_the_cache_key_follows_the_index_encoders_weights(tmp_path, monkeypatch):
    """A model retrained under its name (``tessera-bi-encoder``) embeds queries otherwise: dense and multi-hop
    rankings cached with its old weights were replayed, the key holding only the index and the params."""
    from flows.cache_keys import step_key

    encoder = tmp_path / "encoder"
    encoder.mkdir()
    (encoder / "config.json").write_text("{}")
    (encoder / "model.safetensors").write_bytes(b"old weights")
    dense_class = type(create("retrieve.dense", {"index": "idx"}))
    monkeypatch.setattr(dense_class, "required_models", lambda self: {"params.index (its encoder)": str(encoder)})
    dense = create("retrieve.dense", {"index": "idx"})
    hops = create("retrieve.multi_hop", {"index": "idx", "retriever": "dense"})
    keys = step_key(dense), step_key(hops)
    assert keys == (step_key(dense), step_key(hops))
    (encoder / "model.safetensors").write_bytes(b"new weights")
    assert step_key(dense) != keys[0] and step_key(hops) != keys[1]


@pytest.mark.integration  # the search tries to load the folder (torch's import)
def test_an_index_made_with_other_weights_of_its_encoder_is_said_in_a_search_and_refused_more_documents(
        tmp_path, monkeypatch, caplog):
    """A bi-encoder retrained under its name embedded queries in another space than the index's vectors, and
    documents added to the index were embedded in that other space, without a word. The index records its
    encoder's fingerprint when it is made: a search with other weights says so (a reinstall that rewrites a config
    file changes the fingerprint too), more documents are refused (they would mix two spaces in one index)."""
    from flows.ingestion import ingest
    from flows.ingestion.errors import IngestError
    from operators.store import Index, IndexSettings

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    model = tmp_path / "encoder"
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 384}')
    (model / "model.safetensors").write_bytes(b"first weights")
    made = Index.create(tmp_path / "idx", IndexSettings(encoder=str(model))).manifest.encoder_weights
    assert made and Index.create(tmp_path / "bm25", IndexSettings(dense=False)).manifest.encoder_weights is None
    (model / "model.safetensors").write_bytes(b"weights trained since")
    with caplog.at_level("WARNING", logger="operators.retrieve.dense"), pytest.raises(Exception) as failed:
        create("retrieve.dense", {"index": str(tmp_path / "idx"), "k": 3}, step_id="dense")(queries(1))
    assert "embedded by other weights" not in str(failed.value)  # said first; then this folder fails to load
    assert (f"embedded by other weights of encoder '{model}' than this machine's ({made}, here "
            in caplog.text) and "retrained since, or another copy" in caplog.text
    corpus = tmp_path / "more.jsonl"
    corpus.write_text('{"_id": "d1", "text": "honey bees"}\n')
    with pytest.raises(IngestError, match="embedded by other weights") as refused:
        ingest(str(corpus), str(tmp_path / "idx"), executor="local", progress=False, chunk=False)
    assert refused.value.field == "index"
