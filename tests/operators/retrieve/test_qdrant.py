"""retrieve.qdrant: the contract, exact-search parity on real embedded sample documents, filters, errors."""

from __future__ import annotations

import importlib.util

import numpy as np
import pyarrow as pa
import pytest

from operators.errors import ParamsError
from operators.registry import create
from operators.retrieve._vector_stores import (
    CollectionNotFoundError,
    DimensionMismatchError,
    load_into_qdrant,
)
from operators.testing import (
    SAMPLE_QUERIES,
    OperatorContract,
)
from operators.testing import sample_queries as queries

N_DOCS = 300
#: the session's ``docs`` fixture embeds 300 sample documents with MiniLM (about 8 s on 2 cores)
# Skipped without the package, found without importing it: importing it cost every test-fast worker 0.6-1.8 s
# at collection, for tests that test-fast leaves out (slow).
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    importlib.util.find_spec("qdrant_client") is None,
    reason="qdrant-client is not installed: pip install tessera[stores]")]


@pytest.fixture(scope="module")
def store(docs, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("qdrant")
    assert load_into_qdrant(docs, path, "wiki") == N_DOCS
    assert load_into_qdrant(docs.slice(0, 50), path, "wiki_euclid", distance="euclid") == 50
    return str(path)


class TestQdrantContract(OperatorContract):
    operator_name = "retrieve.qdrant"

    @pytest.fixture(autouse=True)
    def _store(self, store):
        self.path = store

    def make_operator(self, **params):
        return create("retrieve.qdrant", {"path": self.path, "collection": "wiki", "k": 5, **params}, step_id="qd")

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return queries(n_queries)


def test_top_results_and_scores_equal_exact_cosine_search(store, exact_search):
    out = create("retrieve.qdrant", {"path": store, "collection": "wiki", "k": 5}, step_id="qd")(queries(3))
    assert out.num_rows == 15
    for qid, query in SAMPLE_QUERIES.items():
        rows = [r for r in out.to_pylist() if r["qid"] == qid]
        docnos, scores = exact_search(query, 5)
        assert [r["docno"] for r in rows] == docnos
        np.testing.assert_allclose([r["score"] for r in rows], scores, atol=1e-4)
        assert [r["rank"] for r in rows] == [1, 2, 3, 4, 5]
        assert all(r["score_qd"] == r["score"] and r["rank_qd"] == r["rank"] for r in rows)
    bee = out.filter(pa.compute.equal(out.column("qid"), "q1")).to_pylist()[0]
    assert bee["title"] == "Bee" and "honey" in bee["text"].lower() and bee["bucket"] in (0, 1, 2)


def test_euclid_scores_are_negated_distances_in_cosine_order(store, docs, exact_search):
    out = create("retrieve.qdrant", {"path": store, "collection": "wiki_euclid", "k": 3})(queries(1))
    docnos, cosines = exact_search(SAMPLE_QUERIES["q1"], 3, docs=docs.slice(0, 50))
    assert out.column("docno").to_pylist() == docnos
    # unit vectors: |a - b| = sqrt(2 - 2 cos)
    np.testing.assert_allclose(out.column("score").to_pylist(), -np.sqrt(2 - 2 * cosines), atol=1e-4)


def test_where_filter_is_passed_through(store, docs, exact_search):
    where = {"must": [{"key": "bucket", "match": {"value": 2}}]}
    out = create("retrieve.qdrant", {"path": store, "collection": "wiki", "k": 4, "where": where})(queries(2))
    assert set(out.column("bucket").to_pylist()) == {2}
    mask = np.array(docs.column("bucket").to_pylist()) == 2
    for qid, query in list(SAMPLE_QUERIES.items())[:2]:
        assert [r["docno"] for r in out.to_pylist() if r["qid"] == qid] == exact_search(query, 4, mask)[0]
    with pytest.raises(ParamsError) as err:
        create("retrieve.qdrant", {"path": store, "collection": "wiki", "where": {"must": 3}})(queries(1))
    assert err.value.field == "params.where"


def test_missing_collection_and_folder_are_named(store, tmp_path):
    with pytest.raises(CollectionNotFoundError, match="no collection 'nope'.*wiki") as err:
        create("retrieve.qdrant", {"path": store, "collection": "nope"}, step_id="r")(queries(1))
    assert err.value.field == "params.collection" and err.value.step == "r"
    missing = tmp_path / "not-here"
    with pytest.raises(CollectionNotFoundError, match="does not exist"):
        create("retrieve.qdrant", {"path": str(missing), "collection": "wiki"})(queries(1))
    assert not missing.exists()


def test_dimension_mismatch_is_explained(eight_d_docs, tmp_path):
    load_into_qdrant(eight_d_docs, tmp_path, "tiny")
    with pytest.raises(DimensionMismatchError, match="8-d vectors but model 'all-MiniLM-L6-v2' encodes 384-d"):
        create("retrieve.qdrant", {"path": str(tmp_path), "collection": "tiny"})(queries(1))
