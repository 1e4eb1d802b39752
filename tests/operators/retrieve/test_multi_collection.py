"""retrieve.multi_collection: the contract, collection tags, merging, postprocessors in order, errors."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.errors import ParamsError
from operators.registry import create
from operators.testing import SAMPLE_QUERIES, OperatorContract, sample_documents
from operators.testing import sample_queries as queries


@pytest.fixture(scope="module")
def two_indices(tmp_path_factory):
    """BM25 indices over sample docs 0-599 ('early') and 400-999 ('late'): 200 docs in both."""
    from operators.store import Index, IndexSettings

    docs = sample_documents(1000)
    docs = docs.append_column("doc_id", docs.column("docno"))
    root = tmp_path_factory.mktemp("collections")
    paths = {}
    for name, part in (("early", docs.slice(0, 600)), ("late", docs.slice(400))):
        index = Index.create(root / name, IndexSettings(dense=False))
        index.commit([index.write_shard("a", part)])
        paths[name] = str(root / name)
    return paths


def collections(paths, k=10):
    return [{"name": "early", "index": paths["early"], "k": k}, {"name": "late", "index": paths["late"], "k": k}]


class TestMultiCollectionContract(OperatorContract):
    operator_name = "retrieve.multi_collection"

    @pytest.fixture(autouse=True)
    def _indices(self, two_indices):
        self.paths = two_indices

    def make_operator(self, **params):
        return create("retrieve.multi_collection", {"collections": collections(self.paths, 4), **params},
                      step_id="multi")

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return queries(n_queries)


def test_rows_are_tagged_and_interleaved_by_reciprocal_rank(two_indices):
    out = create("retrieve.multi_collection", {"collections": collections(two_indices, 5)}, step_id="m")(queries(3))
    assert set(out.column("collection").to_pylist()) == {"early", "late"}
    for qid in SAMPLE_QUERIES:
        rows = [r for r in out.to_pylist() if r["qid"] == qid]
        assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
        # the first of each collection share the best merged score: ranks 1 and 2 are one of each
        assert {rows[0]["collection"], rows[1]["collection"]} == {"early", "late"}
        for r in rows:
            own = r["rank_m_early"] if r["collection"] == "early" else r["rank_m_late"]
            assert r["score"] == pytest.approx(1 / (60 + own))


def test_documents_in_both_collections_are_deduplicated_then_cut(two_indices):
    query = pa.table({"qid": ["q"], "query": ["music composer symphony opera"]})
    plain = create("retrieve.multi_collection", {"collections": collections(two_indices, 20)})(query)
    docnos = plain.column("docno").to_pylist()
    assert len(docnos) > len(set(docnos)), "the shared docs should come from both collections"
    post = create("retrieve.multi_collection", {
        "collections": collections(two_indices, 20), "merge": "score",
        "postprocess": [{"op": "postprocess.dedup"}, {"op": "postprocess.cutoff", "params": {"max_chunks": 7}}],
    })(query)
    kept = post.column("docno").to_pylist()
    assert len(kept) == 7 and len(set(kept)) == 7
    assert post.column("rank").to_pylist() == list(range(1, 8))
    best: dict[str, float] = {}
    for r in plain.to_pylist():  # merge: score -> the docs in BM25 score order, each once at its best
        best[r["docno"]] = max(best.get(r["docno"], 0.0), r[f"score_multi_collection_{r['collection']}"])
    assert kept == sorted(best, key=lambda d: (-best[d], d))[:7]


def test_params_errors_name_the_collection_or_postprocessor(two_indices):
    with pytest.raises(ParamsError) as err:
        create("retrieve.multi_collection", {"collections": [{"name": "a", "k": 0}]}, step_id="m")
    assert err.value.field.startswith("params.collections.0")
    with pytest.raises(ParamsError) as err:
        create("retrieve.multi_collection", {"collections": [{"name": "a"}, {"name": "a"}]})
    assert "unique" in err.value.message
    with pytest.raises(ParamsError) as err:
        create("retrieve.multi_collection", {"collections": [{"name": "a"}],
                                             "postprocess": [{"op": "postprocess.cutoff", "params": {"top": 1}}]},
               step_id="m")
    assert err.value.field == "params.postprocess.0.params.top" and err.value.step == "m"
    with pytest.raises(ParamsError) as err:
        create("retrieve.multi_collection", {"collections": [{"name": "a"}], "postprocess": [{"op": "nope.op"}]})
    assert err.value.field == "params.postprocess.0.op"
