"""fuse.weighted: the contract, each normalisation, flat lists never zeroed, properties, ranx parity."""

from __future__ import annotations

import math
import random

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from operators.errors import OperatorError, ParamsError
from operators.fuse._fusion import normalise
from operators.registry import create
from operators.testing import OperatorContract, sample_documents

DOCS = sample_documents(12).column("docno").to_pylist()
NORMS = ["min-max", "max", "sum", "z-score"]


def weighted(**params):
    return create("fuse.weighted", params, step_id="fused", input_steps=("bm25", "dense"))


class TestWeightedContract(OperatorContract):
    operator_name = "fuse.weighted"

    @pytest.fixture(autouse=True)
    def _union(self, make_union):
        self.union = make_union

    def make_operator(self, **params):
        return weighted(**params)

    def make_input(self, n_queries: int = 3, per_query: int = 5) -> pa.Table:
        qids = ["q1", "q2", "q3"][:n_queries]
        return self.union({
            "bm25": {q: [(DOCS[i + j], float(9 - i)) for i in range(per_query)] for j, q in enumerate(qids)},
            "dense": {q: [(DOCS[i + j + 2], 0.9 - 0.1 * i) for i in range(per_query)] for j, q in enumerate(qids)},
        })


def test_min_max_weighted_sum(make_union):
    table = make_union({
        "bm25": {"q1": [("a", 10.0), ("b", 6.0), ("c", 2.0)]},
        "dense": {"q1": [("c", 0.8), ("d", 0.6), ("a", 0.4)]},
    })
    out = weighted(weights={"bm25": 0.25, "dense": 0.75})(table)
    scores = dict(zip(out.column("docno").to_pylist(), out.column("score").to_pylist()))
    assert scores == pytest.approx({"a": 0.25 * 1 + 0.75 * 0, "b": 0.25 * 0.5, "c": 0.25 * 0 + 0.75 * 1,
                                    "d": 0.75 * 0.5})
    assert out.column("docno").to_pylist() == ["c", "d", "a", "b"]
    assert out.column("rank_fused").to_pylist() == [1, 2, 3, 4]


def test_flat_lists_are_not_zeroed(make_union):
    """All-equal scores (Haystack's and Open WebUI's min-max bug gave 0 to every document)."""
    table = make_union({"bm25": {"q1": [("a", 3.0), ("b", 3.0)]}, "dense": {"q1": [("c", 0.2)]}})
    for norm, expected in (("min-max", 1.0), ("max", 1.0), ("sum", None)):
        out = weighted(normalisation=norm)(table)
        scores = dict(zip(out.column("docno").to_pylist(), out.column("score").to_pylist()))
        if expected is not None:
            assert scores == pytest.approx({"a": 1.0, "b": 1.0, "c": 1.0}), norm
        else:
            assert scores == pytest.approx({"a": 0.5, "b": 0.5, "c": 1.0})
    out = weighted(normalisation="z-score")(table)
    assert out.column("score").to_pylist() == [0.0, 0.0, 0.0]  # every score is its list's mean


@pytest.mark.parametrize("bad", [math.inf, -math.inf])
def test_an_infinite_score_is_refused_naming_its_column_and_query(make_union, bad):
    """It normalised to NaN: the best BM25 document came last, or the whole branch was zeroed (ranx too)."""
    table = make_union({"bm25": {"q1": [("a", 10.0), ("b", 6.0)], "q2": [("c", bad), ("d", 2.0)]},
                        "dense": {"q1": [("c", 0.8), ("d", 0.6)]}})
    with pytest.raises(OperatorError, match=rf"score_bm25 of query 'q2' holds {bad}: a score fusion needs finite") as e:
        weighted()(table)
    assert e.value.field == "params.branches"


def test_a_branch_with_ranks_but_no_scores_is_refused_naming_the_column(make_union):
    """Its scores read as NaN and each normalised to 1: the ranking came out in docno order."""
    table = make_union({"bm25": {"q1": [("b", 2.0), ("a", 1.0)]}, "dense": {"q1": [("c", 0.8)]}})
    with pytest.raises(OperatorError, match=r"branch 'bm25' has rank_bm25 but no score_bm25"):
        weighted()(table.drop_columns(["score_bm25"]))
    assert create("fuse.rrf", {}, step_id="fused", input_steps=("bm25", "dense"))(
        table.drop_columns(["score_bm25"])).column("docno").to_pylist()[0] == "b"


def test_normalise_formulas():
    s = np.array([4.0, 2.0, 0.0, -2.0])
    assert normalise(s, "min-max").tolist() == pytest.approx([1, 2 / 3, 1 / 3, 0])
    assert normalise(s, "max").tolist() == pytest.approx([1, 0.5, 0, -0.5])
    assert normalise(s, "sum").tolist() == pytest.approx([6 / 12, 4 / 12, 2 / 12, 0])
    assert normalise(s, "z-score").tolist() == pytest.approx(((s - s.mean()) / s.std()).tolist())
    negative = np.array([-0.1, -0.3])  # inner products can all be negative
    assert normalise(negative, "max").tolist() == pytest.approx([1, 0])  # nothing positive: min-max, best = 1
    assert normalise(np.array([]), "min-max").size == 0


def test_unknown_normalisation_is_a_params_error():
    with pytest.raises(ParamsError) as err:
        create("fuse.weighted", {"normalisation": "minmax"}, step_id="w")
    assert err.value.field == "params.normalisation"


@pytest.mark.parametrize("name", ["fuse.weighted", "fuse.rrf"])
def test_a_negative_weight_is_refused_naming_the_branch(name):
    with pytest.raises(ParamsError) as err:
        create(name, {"weights": {"bm25": 0.5, "dense": -1}}, step_id="w", input_steps=("bm25", "dense"))
    assert err.value.field == "params.weights.dense"
    assert "a weight is 0 or more" in str(err.value) and "upside down" in str(err.value)


@pytest.mark.parametrize("name", ["fuse.weighted", "fuse.rrf"])
def test_a_weight_of_a_misspelt_branch_suggests_the_close_branch(name):
    """An unknown param gets "did you mean 'k'?"; a weight of a misspelt branch got only the list of branches."""
    with pytest.raises(ParamsError) as err:
        create(name, {"weights": {"bm25": 1, "dnse": 1}}, step_id="w", input_steps=("bm25", "dense"))
    assert err.value.message == ("weights name ['dnse'], which are not branches of this step; did you mean 'dense'? "
                                 "(branches: ['bm25', 'dense'])")
    assert err.value.field == "params.weights"
    with pytest.raises(ParamsError) as err:
        create(name, {"weights": {"splade": 1}}, step_id="w", input_steps=("bm25", "dense"))
    assert "did you mean" not in err.value.message and "(branches: ['bm25', 'dense'])" in err.value.message


def test_weights_that_leave_out_every_branch_are_refused_and_one_left_out_is_not(make_union):
    with pytest.raises(ParamsError, match="every branch's weight is 0") as err:
        weighted(weights={"bm25": 0, "dense": 0.0})
    assert err.value.field == "params.weights"
    table = make_union({"bm25": {"q1": [("a", 10.0), ("b", 6.0)]},
                        "dense": {"q1": [("b", 0.8), ("c", 0.7), ("d", 0.4)]}})
    out = weighted(weights={"bm25": 0})(table)  # dense alone: a, found by bm25 only, is left out with it
    scores = dict(zip(out.column("docno").to_pylist(), out.column("score").to_pylist()))
    assert scores == pytest.approx({"b": 1.0, "c": 0.75, "d": 0.0})


hit = st.tuples(st.sampled_from(["a", "b", "c", "d", "e", "f"]),
                st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.5, -1.0, 1e-9]))
runs = st.dictionaries(
    st.sampled_from(["bm25", "dense", "splade"]),
    st.dictionaries(st.sampled_from(["q1", "q2"]), st.lists(hit, min_size=1, max_size=8), min_size=1, max_size=2),
    min_size=1, max_size=3,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=runs, norm=st.sampled_from(NORMS), seed=st.integers(0, 1000))
def test_properties(make_union, runs, norm, seed):
    table = make_union(runs)
    op = create("fuse.weighted", {"normalisation": norm}, step_id="f", input_steps=tuple(runs))
    out = op(table)
    keys = list(zip(out.column("qid").to_pylist(), out.column("docno").to_pylist()))
    assert len(keys) == len(set(keys))
    assert set(keys) == set(zip(table.column("qid").to_pylist(), table.column("docno").to_pylist()))
    for qid in set(out.column("qid").to_pylist()):
        rows = [r for r in out.to_pylist() if r["qid"] == qid]
        assert sorted(r["rank"] for r in rows) == list(range(1, len(rows) + 1))
        scores = [r["score"] for r in rows]
        assert all(math.isfinite(s) for s in scores)
        if norm != "z-score":
            assert max(scores) > 0, "every score of a query was zeroed"
    order = list(range(table.num_rows))
    random.Random(seed).shuffle(order)
    again = op(table.take(pa.array(order)))
    key = lambda r: (r["qid"], r["rank"])  # noqa: E731
    assert sorted(again.to_pylist(), key=key) == sorted(out.to_pylist(), key=key)


def test_empty_input(make_union):
    assert weighted()(make_union({"bm25": {"q1": [("a", 1.0)]}}).slice(0, 0)).num_rows == 0


@pytest.mark.slow
def test_parity_with_ranx(make_union, ranx_fuse):
    """ranx.fuse(norm=..., method="wsum") on generic lists (distinct positive scores, every query in
    every branch): the same fused scores."""
    rng = random.Random(3)
    runs = {b: {f"q{q}": [(f"d{d}", 0.1 + rng.random()) for d in rng.sample(range(50), 20)] for q in range(4)}
            for b in ("bm25", "dense")}
    norms = {"min-max": "min-max", "max": "max", "sum": "sum", "z-score": "zmuv"}  # ours: ranx's
    references = ranx_fuse(runs, *({"norm": theirs, "method": "wsum", "params": {"weights": [0.3, 0.7]}}
                                   for theirs in norms.values()))
    for ours_norm, theirs in zip(norms, references):
        op = create("fuse.weighted", {"normalisation": ours_norm, "weights": {"bm25": 0.3, "dense": 0.7}},
                    input_steps=tuple(runs))
        ours = {(r["qid"], r["docno"]): r["score"] for r in op(make_union(runs)).to_pylist()}
        assert ours == pytest.approx(theirs, rel=1e-9, abs=1e-12), ours_norm
