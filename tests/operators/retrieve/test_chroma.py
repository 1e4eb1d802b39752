"""retrieve.chroma: the contract, exact-search parity on real embedded sample documents, filters, errors."""

from __future__ import annotations

import importlib.util

import numpy as np
import pyarrow as pa
import pytest

from operators.errors import OperatorError
from operators.registry import create
from operators.retrieve._vector_stores import (
    CollectionNotFoundError,
    DimensionMismatchError,
    load_into_chroma,
)
from operators.retrieve.chroma import chroma_similarity
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
    importlib.util.find_spec("chromadb") is None,
    reason="Chroma is not installed: pip install tessera[stores]")]


@pytest.fixture(scope="module")
def store(docs, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("chroma")
    assert load_into_chroma(docs, path, "wiki") == N_DOCS
    assert load_into_chroma(docs.slice(0, 50), path, "wiki_l2", space="l2") == 50
    return str(path)


class TestChromaContract(OperatorContract):
    operator_name = "retrieve.chroma"

    @pytest.fixture(autouse=True)
    def _store(self, store):
        self.path = store

    def make_operator(self, **params):
        return create("retrieve.chroma", {"path": self.path, "collection": "wiki", "k": 5, **params}, step_id="ch")

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return queries(n_queries)


def test_top_results_equal_exact_cosine_search(store, exact_search):
    out = create("retrieve.chroma", {"path": store, "collection": "wiki", "k": 5}, step_id="ch")(queries(3))
    assert out.num_rows == 15
    for qid, query in SAMPLE_QUERIES.items():
        rows = [r for r in out.to_pylist() if r["qid"] == qid]
        docnos, cosines = exact_search(query, 5)
        assert [r["docno"] for r in rows] == docnos
        assert [r["rank"] for r in rows] == [1, 2, 3, 4, 5]
        # cosine space: score is the cosine similarity itself
        np.testing.assert_allclose([r["score"] for r in rows], cosines, atol=1e-4)
        assert all(r["score_ch"] == r["score"] and r["rank_ch"] == r["rank"] for r in rows)
    bee = out.filter(pa.compute.equal(out.column("qid"), "q1")).to_pylist()[0]
    assert bee["title"] == "Bee" and "honey" in bee["text"].lower() and bee["bucket"] in (0, 1, 2)


def test_l2_space_scores_are_negated_distances_in_cosine_order(store, docs, exact_search):
    out = create("retrieve.chroma", {"path": store, "collection": "wiki_l2", "k": 3})(queries(1))
    assert out.column("docno").to_pylist() == exact_search(SAMPLE_QUERIES["q1"], 3, docs=docs.slice(0, 50))[0]
    scores = out.column("score").to_pylist()
    assert all(-4.0 <= s <= 0.0 for s in scores) and scores == sorted(scores, reverse=True)
    np.testing.assert_allclose(chroma_similarity([0.2], "cosine"), [0.8])
    np.testing.assert_allclose(chroma_similarity([0.2], "l2"), [-0.2])


def test_where_filter_is_passed_through(store, docs, exact_search):
    out = create("retrieve.chroma", {"path": store, "collection": "wiki", "k": 4,
                                     "where": {"bucket": {"$eq": 1}}})(queries(2))
    assert set(out.column("bucket").to_pylist()) == {1}
    mask = np.array(docs.column("bucket").to_pylist()) == 1
    for qid, query in list(SAMPLE_QUERIES.items())[:2]:
        got = [r["docno"] for r in out.to_pylist() if r["qid"] == qid]
        assert got == exact_search(query, 4, mask)[0]


def test_query_columns_pass_through_and_duplicate_qids_collapse(store):
    table = pa.table({"qid": ["a", "a"], "query": ["opera", "opera"], "session": ["s1", "s1"]})
    out = create("retrieve.chroma", {"path": store, "collection": "wiki", "k": 2})(table)
    assert out.column("qid").to_pylist() == ["a", "a"] and out.column("session").to_pylist() == ["s1", "s1"]


def test_missing_collection_and_folder_are_named(store, tmp_path):
    with pytest.raises(CollectionNotFoundError, match="no collection 'nope'.*wiki") as err:
        create("retrieve.chroma", {"path": store, "collection": "nope"}, step_id="r")(queries(1))
    assert err.value.field == "params.collection" and err.value.step == "r"
    missing = tmp_path / "not-here"
    with pytest.raises(CollectionNotFoundError, match="does not exist"):
        create("retrieve.chroma", {"path": str(missing), "collection": "wiki"})(queries(1))
    assert not missing.exists()  # no empty store was created for a mistyped path


def test_dimension_mismatch_is_explained(eight_d_docs, tmp_path):
    load_into_chroma(eight_d_docs, tmp_path, "tiny")
    with pytest.raises(DimensionMismatchError, match="8-d vectors but model 'all-MiniLM-L6-v2' encodes 384-d"):
        create("retrieve.chroma", {"path": str(tmp_path), "collection": "tiny"})(queries(1))
    assert issubclass(DimensionMismatchError, OperatorError)
