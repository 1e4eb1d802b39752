"""Paired tests and the correction, on per-query values of real runs over the SciFact slice."""

from __future__ import annotations

import random

import numpy as np
import pytest

from flows.bench import metrics, significance

# scipy's and statsmodels' references are imported in the tests that use them: make test-fast collects this
# module (marked data) without running it, and importing scipy.stats cost each of its workers about a second.
pytestmark = pytest.mark.data


@pytest.fixture(scope="module")
def per_query(scifact_slice, flow_specs):
    """{flow: {measure: {qid: value}}} for the three slice flows, run in-process."""
    from flows.bench.dataset import load_dataset
    from flows.bench.runs import to_run
    from flows.executors.local import LocalExecutor
    from flows.spec import FlowSpec

    ds = load_dataset(scifact_slice)
    out = {}
    for name, path in flow_specs.items():
        result = LocalExecutor(keep_history=False).run(FlowSpec.load(path), ds.queries)
        out[name] = metrics.per_query(to_run(name, result.table), ds.qrels, ds.qids, [5, 10])
    return out


def _shuffled(values: dict[str, float], seed: int) -> dict[str, float]:
    items = list(values.items())
    random.Random(seed).shuffle(items)
    return dict(items)


@pytest.mark.parametrize("test", ["t", "wilcoxon"])
def test_pairing_is_by_qid_not_by_position(per_query, test):
    from scipy import stats

    base, other = per_query["title"]["nDCG@10"], per_query["notitle"]["nDCG@10"]
    qids, a, b = significance.aligned(base, other)
    expected = (stats.ttest_rel(b, a) if test == "t" else stats.wilcoxon(b, a)).pvalue
    assert significance.paired_p(a, b, test) == pytest.approx(expected, rel=1e-12)
    # Each flow's values in a different order: the same pairs, the same p.
    _, a2, b2 = significance.aligned(_shuffled(base, 1), _shuffled(other, 2))
    assert significance.paired_p(a2, b2, test) == pytest.approx(expected, rel=1e-12)
    # Pairing by position after shuffling would give another p (so the check can fail).
    positional = np.array(list(_shuffled(other, 2).values()))
    assert (stats.ttest_rel(positional, a) if test == "t" else stats.wilcoxon(positional, a)).pvalue != expected


def test_a_query_missing_from_a_flow_counts_as_zero(per_query):
    base = per_query["title"]["nDCG@10"]
    dropped = dict(base)
    gone = next(q for q, v in base.items() if v > 0)
    del dropped[gone]
    qids, a, b = significance.aligned(base, dropped, qids=list(base))
    assert len(qids) == len(base) and b[qids.index(gone)] == 0.0 and a[qids.index(gone)] > 0


def test_correction_leaves_the_baseline_out(per_query):
    from statsmodels.stats.multitest import multipletests

    rows = significance.compare(per_query, ["title"], ["nDCG@10", "P@5"], test="t", correction="holm")
    assert {(r.flow, r.measure) for r in rows} == {(f, m) for f in ("notitle", "top5") for m in ("nDCG@10", "P@5")}
    for measure in ("nDCG@10", "P@5"):
        family = [r for r in rows if r.measure == measure]
        raw = [r.p for r in family]
        assert [r.p_corrected for r in family] == pytest.approx(list(multipletests(raw, method="holm")[1]))
    # Two baselines: each is compared with the other flows, never with itself.
    both = significance.compare(per_query, ["title", "top5"], ["nDCG@10"], correction="bonferroni")
    assert {(r.baseline, r.flow) for r in both} == {("title", "notitle"), ("title", "top5"),
                                                   ("top5", "title"), ("top5", "notitle")}
    for r in both:
        assert r.p_corrected == pytest.approx(min(1.0, 2 * r.p))
        assert r.wins + r.losses + r.ties == r.n == 30


def test_identical_flows_have_p_one_and_only_ties(per_query):
    rows = significance.compare({"a": per_query["title"], "b": per_query["title"]}, ["a"], ["nDCG@10"])
    assert rows[0].p == 1.0 and rows[0].ties == 30 and rows[0].delta == 0.0


def test_a_constant_difference_has_no_t_test_and_no_warning_but_a_wilcoxon_p(per_query, recwarn):
    """Every query one better: the differences have no variance, so t is undefined (scipy said p 0.0 with a
    precision warning on stderr); it is left out (NaN, as for a single query), and the Wilcoxon test answers."""
    from scipy import stats

    base = np.array(list(per_query["title"]["nDCG@10"].values()))
    better = base + 0.125
    assert np.isnan(significance.paired_p(base, better, "t"))
    assert significance.paired_p(base, better, "wilcoxon") == pytest.approx(stats.wilcoxon(better, base).pvalue)
    assert significance.paired_p(base, base, "t") == 1.0
    nearly = better + np.linspace(0, 1e-7, base.size)  # almost constant: a t-test, far below 0.05
    assert 0 <= significance.paired_p(base, nearly, "t") < 0.05
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_the_delta_interval_holds_the_delta_and_says_how_large_a_gain_may_be(per_query):
    """The interval of Δ is the bootstrap of the per-query differences (as the measures' own intervals): it holds
    Δ, is [0, 0] for identical flows, excludes 0 for a flow better on every query, and is the same on a rerun."""
    title = per_query["title"]["nDCG@10"]
    better = {q: v + 0.05 + 0.01 * (i % 3) for i, (q, v) in enumerate(sorted(title.items()))}
    flows = {"a": {"nDCG@10": title}, "same": {"nDCG@10": title}, "better": {"nDCG@10": better},
             "other": per_query["notitle"]}
    rows = {r.flow: r for r in significance.compare(flows, ["a"], ["nDCG@10"])}
    assert (rows["same"].delta_low, rows["same"].delta_high) == (0.0, 0.0)
    assert 0.05 <= rows["better"].delta_low <= rows["better"].delta <= rows["better"].delta_high <= 0.07
    other = rows["other"]
    assert other.delta_low < other.delta < other.delta_high  # real differences of two flows: a real interval
    differences = np.array([per_query["notitle"]["nDCG@10"].get(q, 0.0) - v for q, v in sorted(title.items())])
    assert (other.delta_low, other.delta_high) == pytest.approx(
        np.percentile([np.random.default_rng(s).choice(differences, differences.size).mean() for s in range(4000)],
                      [2.5, 97.5]), abs=0.01)  # what a bootstrap of its own finds, to a hundredth
    again = {r.flow: r for r in significance.compare(flows, ["a"], ["nDCG@10"])}
    assert again == rows
