"""fuse.rrf: the contract, the RRF arithmetic, dedup across and within branches, properties, flows."""

from __future__ import annotations

import math
import random

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.errors import OperatorError, ParamsError
from operators.registry import create
from operators.testing import OperatorContract, sample_documents

DOCS = sample_documents(12).column("docno").to_pylist()


def rrf(**params):
    return create("fuse.rrf", params, step_id="fused", input_steps=("bm25", "dense"))


def two_branches(n_queries: int, per_query: int) -> dict:
    qids = ["q1", "q2", "q3"][:n_queries]
    return {
        "bm25": {q: [(DOCS[i + j], float(per_query - i)) for i in range(per_query)] for j, q in enumerate(qids)},
        "dense": {q: [(DOCS[i + j + 2], 0.9 - 0.1 * i) for i in range(per_query)] for j, q in enumerate(qids)},
    }


class TestRRFContract(OperatorContract):
    operator_name = "fuse.rrf"

    @pytest.fixture(autouse=True)
    def _union(self, make_union):
        self.union = make_union

    def make_operator(self, **params):
        return rrf(**params)

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        return self.union(two_branches(n_queries, per_query))


def test_rrf_scores_dedup_and_branch_columns(make_union):
    table = make_union({
        "bm25": {"q1": [("a", 9.0), ("b", 5.0), ("c", 1.0)]},
        "dense": {"q1": [("c", 0.9), ("d", 0.8), ("a", 0.1)]},
    })
    out = rrf(k=60)(table)
    rows = {r["docno"]: r for r in out.to_pylist()}
    assert out.num_rows == 4 and sorted(rows) == ["a", "b", "c", "d"]
    assert rows["a"]["score"] == pytest.approx(1 / 61 + 1 / 63)
    assert rows["c"]["score"] == pytest.approx(1 / 63 + 1 / 61)
    assert rows["b"]["score"] == pytest.approx(1 / 62) and rows["d"]["score"] == pytest.approx(1 / 62)
    # a and c tie, then b and d: ties broken by docno; every branch's ranking stays on the row
    assert out.column("docno").to_pylist() == ["a", "c", "b", "d"]
    assert out.column("rank").to_pylist() == [1, 2, 3, 4]
    assert rows["a"]["rank_bm25"] == 1 and rows["a"]["rank_dense"] == 3 and rows["a"]["score_dense"] == 0.1
    assert rows["b"]["rank_dense"] is None and rows["d"]["rank_bm25"] is None
    assert rows["a"]["rank_fused"] == 1 and rows["a"]["score_fused"] == rows["a"]["score"]


def test_weights_and_k():
    from operators.tables import concat, set_ranking

    def branch(name, docs):
        t = pa.table({"qid": ["q"] * len(docs), "query": ["x"] * len(docs), "docno": docs})
        return set_ranking(t, [float(len(docs) - i) for i in range(len(docs))], name)

    table = concat([branch("bm25", ["a", "b"]), branch("dense", ["b", "a"])])
    plain = rrf(k=0)(table)
    assert plain.column("score").to_pylist() == pytest.approx([1.5, 1.5])
    heavy = rrf(k=0, weights={"dense": 3.0})(table)
    assert heavy.column("docno").to_pylist() == ["b", "a"]
    assert heavy.column("score").to_pylist() == pytest.approx([0.5 + 3 * 1, 1 + 3 * 0.5])


def test_a_branch_weighted_0_is_left_out_with_the_documents_only_it_found(make_union):
    """Its documents were kept at score 0, tied below the others in docno order (296 of 617 rows of a run)."""
    table = make_union({"bm25": {"q1": [("a", 9.0), ("b", 5.0)], "q2": [("e", 1.0)]},
                        "dense": {"q1": [("c", 0.9), ("a", 0.8), ("d", 0.1)], "q2": [("f", 0.5)]}})
    out = rrf(k=60, weights={"dense": 0})(table)
    assert out.column("qid").to_pylist() == ["q1", "q1", "q2"] and out.column("docno").to_pylist() == ["a", "b", "e"]
    assert out.column("score").to_pylist() == pytest.approx([1 / 61, 1 / 62, 1 / 61])
    assert out.column("rank_dense").to_pylist() == [2, None, None]  # a's dense ranking stays visible


def test_same_document_twice_in_a_branch_counts_once_at_its_best_rank(make_union):
    table = make_union({"bm25": {"q1": [("a", 3.0), ("b", 2.0), ("a", 1.0)]}, "dense": {"q1": [("b", 1.0)]}})
    out = rrf(k=60)(table)
    scores = dict(zip(out.column("docno").to_pylist(), out.column("score").to_pylist()))
    assert scores == pytest.approx({"a": 1 / 61, "b": 1 / 62 + 1 / 61})


def test_a_query_one_branch_did_not_find(make_union):
    table = make_union({"bm25": {"q1": [("a", 1.0)], "q2": [("b", 2.0)]}, "dense": {"q2": [("c", 0.5)]}})
    out = rrf()(table)
    assert sorted(zip(out.column("qid").to_pylist(), out.column("docno").to_pylist())) == [
        ("q1", "a"), ("q2", "b"), ("q2", "c")]


def test_branch_columns_missing_or_unknown_weights_are_named(make_union):
    table = make_union({"bm25": {"q1": [("a", 1.0)]}, "dense": {"q1": [("b", 1.0)]}})
    with pytest.raises(OperatorError) as err:
        create("fuse.rrf", {}, step_id="f", input_steps=("bm25", "ce"))(table)
    assert err.value.field == "params.branches" and "rank_ce" in err.value.message and err.value.step == "f"
    with pytest.raises(ParamsError) as err:  # known from params and inputs: refused when constructed, before a run
        rrf(weights={"bm52": 1.0})
    assert err.value.field == "params.weights" and "bm52" in err.value.message
    with pytest.raises(OperatorError) as err:
        create("fuse.rrf", {})(table)  # no fan-in, no branches
    assert err.value.field == "params.branches"
    # explicit branches work without a fan-in
    assert create("fuse.rrf", {"branches": ["bm25", "dense"]})(table).num_rows == 2


# -- properties -----------------------------------------------------------------------

hit = st.tuples(st.sampled_from(["a", "b", "c", "d", "e", "f"]), st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.5, -1.0]))
runs = st.dictionaries(
    st.sampled_from(["bm25", "dense", "splade"]),
    st.dictionaries(st.sampled_from(["q1", "q2"]), st.lists(hit, min_size=1, max_size=8), max_size=2),
    min_size=1, max_size=3,
)


def check_fused(table: pa.Table, out: pa.Table) -> None:
    keys = list(zip(out.column("qid").to_pylist(), out.column("docno").to_pylist()))
    assert len(keys) == len(set(keys)), "a document came out twice"
    assert set(keys) == set(zip(table.column("qid").to_pylist(), table.column("docno").to_pylist()))
    by_qid: dict[str, list] = {}
    for row in out.to_pylist():
        by_qid.setdefault(row["qid"], []).append(row)
    for rows in by_qid.values():
        assert sorted(r["rank"] for r in rows) == list(range(1, len(rows) + 1))
        scores = [r["score"] for r in rows]
        assert all(math.isfinite(s) for s in scores)
        assert max(scores) > 0, "fusion zeroed every score of a query"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=runs, seed=st.integers(0, 1000))
def test_properties(make_union, runs, seed):
    table = make_union(runs)
    branches = tuple(runs)
    op = create("fuse.rrf", {}, step_id="f", input_steps=branches)
    out = op(table)
    if table.num_rows == 0:
        assert out.num_rows == 0
        return
    check_fused(table, out)
    order = list(range(table.num_rows))
    random.Random(seed).shuffle(order)
    shuffled = op(table.take(pa.array(order)))
    # Queries keep their order of first appearance; within each query nothing may change.
    def by_query(t):
        return sorted(t.to_pylist(), key=lambda r: (r["qid"], r["rank"]))

    assert by_query(shuffled) == by_query(out), "the result depends on the order of the input rows"


def test_empty_and_one_document(make_union):
    assert rrf()(make_union({"bm25": {"q1": [("a", 1.0)]}}).slice(0, 0)).num_rows == 0
    one = create("fuse.rrf", {}, input_steps=("bm25",))(make_union({"bm25": {"q1": [("a", 0.0)]}}))
    assert one.column("rank").to_pylist() == [1] and one.column("score").to_pylist() == [pytest.approx(1 / 61)]


# -- in a flow, and parity with ranx -----------------------------------------------------

def test_hybrid_flow_over_the_sample_corpus():
    from flows.executors.local import LocalExecutor
    from flows.spec import FlowSpec

    spec = FlowSpec.parse({"name": "rrf", "steps": {
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"k": 10}},
        "bm25_notitle": {"op": "retrieve.corpus_bm25", "params": {"k": 10, "index_title": False}, "inputs": []},
        "fused": {"op": "fuse.rrf", "inputs": ["bm25", "bm25_notitle"]},
    }})
    out = LocalExecutor().run(spec, ["which insects make honey and pollinate flowers"]).table
    docnos = out.column("docno").to_pylist()
    assert len(docnos) == len(set(docnos)) and out.column("title").to_pylist()[0] == "Bee"
    both = [r for r in out.to_pylist() if r["rank_bm25"] is not None and r["rank_bm25_notitle"] is not None]
    assert both and all(r["score"] == pytest.approx(1 / (60 + r["rank_bm25"]) + 1 / (60 + r["rank_bm25_notitle"]))
                        for r in both)


@pytest.mark.slow
def test_parity_with_ranx(make_union, ranx_fuse):
    """ranx.fuse(method="rrf") on rankings without ties: the same scores."""
    rng = random.Random(7)
    runs = {b: {f"q{q}": [(f"d{d}", rng.random()) for d in rng.sample(range(60), 25)] for q in range(5)}
            for b in ("bm25", "dense", "splade")}
    out = create("fuse.rrf", {"k": 60}, input_steps=tuple(runs))(make_union(runs))
    ours = {(r["qid"], r["docno"]): r["score"] for r in out.to_pylist()}
    [theirs] = ranx_fuse(runs, {"norm": None, "method": "rrf", "params": {"k": 60}})
    assert ours == pytest.approx(theirs, rel=1e-12)
