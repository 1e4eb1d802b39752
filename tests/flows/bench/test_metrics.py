"""Measures from ir-measures, and the two derived from its per-query P and R."""

from __future__ import annotations

from pathlib import Path

import ir_measures
import numpy as np
import pyarrow as pa
import pytest

from flows.bench import metrics


def _run(rows):
    qids, docnos = zip(*rows) if rows else ((), ())
    ranks = []
    seen: dict[str, int] = {}
    for q in qids:
        seen[q] = seen.get(q, 0) + 1
        ranks.append(seen[q])
    return pa.table({"qid": list(qids), "docno": list(docnos), "rank": pa.array(ranks, pa.int32())})


QRELS = pa.table({"qid": ["q1", "q1", "q2", "q3"], "docno": ["a", "b", "c", "d"],
                  "relevance": pa.array([1, 1, 1, 1], pa.int32())})


def test_values_at_each_cutoff_and_derived_measures():
    # q1: both gold at ranks 1 and 3; q2: gold at rank 2; q3: nothing retrieved.
    run = _run([("q1", "a"), ("q1", "x"), ("q1", "b"), ("q2", "y"), ("q2", "c")])
    values = metrics.per_query(run, QRELS, ["q1", "q2", "q3"], [1, 3])
    assert values["R@1"] == {"q1": 0.5, "q2": 0.0, "q3": 0.0}
    assert values["PerfectRecall@1"] == {"q1": 0.0, "q2": 0.0, "q3": 0.0}
    assert values["PerfectRecall@3"] == {"q1": 1.0, "q2": 1.0, "q3": 0.0}
    assert values["RR@3"] == {"q1": 1.0, "q2": 0.5, "q3": 0.0}
    assert values["F1@3"]["q1"] == pytest.approx(2 * (2 / 3) * 1.0 / (2 / 3 + 1.0))
    assert values["F1@1"]["q2"] == 0.0
    assert set(values) == set(metrics.measure_names([1, 3]))


def test_rank_orders_documents_not_score():
    # Tied scores: ir-measures (pytrec_eval) would break the tie by docno and put 'c'
    # first; the flow ranked 'a' first, and its rank is what counts.
    run = _run([("q2", "a"), ("q2", "c")]).append_column("score", pa.array([1.0, 1.0]))
    tied = [ir_measures.ScoredDoc(q, d, s) for q, d, s in zip(*(run[c].to_pylist() for c in ("qid", "docno", "score")))]
    p1 = ir_measures.parse_measure("P@1")
    q2_qrels = [q for q in metrics.qrels_records(QRELS) if q.query_id == "q2"]
    assert ir_measures.calc_aggregate([p1], q2_qrels, tied)[p1] == 1.0
    values = metrics.per_query(run, QRELS, ["q2"], [1, 2])
    assert values["P@1"]["q2"] == 0.0 and values["RR@2"]["q2"] == 0.5


def test_a_document_returned_twice_counts_once_at_its_best_rank():
    """A flow that returns a document twice (two retrievers concatenated, say) is scored as its ranking reads: the
    document where it first appears. ir-measures keeps one score per document, the last: q1's 'a' counted at rank 3."""
    from flows.bench.runs import to_run

    result = pa.table({"qid": ["q1", "q1", "q1", "q2"], "docno": ["a", "x", "a", "c"], "score": [3.0, 2.0, 1.0, 1.0]})
    run = to_run("twice", result)
    assert run.to_pylist() == [{"qid": "q1", "docno": "a", "rank": 1, "score": 3.0},
                               {"qid": "q1", "docno": "x", "rank": 2, "score": 2.0},
                               {"qid": "q2", "docno": "c", "rank": 1, "score": 1.0}]
    values = metrics.per_query(run, QRELS, ["q1", "q2"], [1, 3])
    assert values["RR@3"] == {"q1": 1.0, "q2": 1.0} and values["P@1"] == {"q1": 1.0, "q2": 1.0}
    ranked = to_run("twice", result.drop_columns(["score"]).append_column("rank", pa.array([1, 2, 3, 1])))
    assert ranked.column("docno").to_pylist() == ["a", "x", "c"] and ranked.column("rank").to_pylist() == [1, 2, 1]


def test_summary_confidence_interval_contains_the_mean():
    s = metrics.summarize([0.0, 1.0, 1.0, 0.5])
    assert s.ci_low < s.mean == 0.625 < s.ci_high and s.n == 4
    flat = metrics.summarize([0.3, 0.3])
    assert flat.ci_low == flat.ci_high == 0.3


@pytest.mark.parametrize("values", [
    [1.0] * 29 + [0.0],                      # a proportion near 1 (a t interval reaches 1.035)
    [0.0] * 29 + [1.0],                      # near 0
    [0.0] * 30,                              # all 0: still an interval, [0, 0.11]
    [1.0] * 27 + [0.5] * 2 + [0.0],          # bounded, not a proportion, near 1 (t: 1.014)
    [0.02] * 28 + [0.9, 1.0],                # skewed near 0
])
def test_confidence_intervals_stay_inside_0_1(values):
    s = metrics.summarize(values)
    assert 0.0 <= s.ci_low <= s.mean <= s.ci_high <= 1.0, s
    assert s.ci_high > s.ci_low and s.n == len(values)


def test_proportions_get_wilsons_interval_and_the_rest_a_seeded_bootstrap():
    from scipy import stats
    from statsmodels.stats.proportion import proportion_confint

    s = metrics.summarize([1.0] * 29 + [0.0])
    assert (s.ci_low, s.ci_high) == pytest.approx(proportion_confint(29, 30, alpha=0.05, method="wilson"))
    graded = [0.1 * (i % 11) for i in range(40)]
    expected = stats.bootstrap((graded,), lambda x, axis: x.mean(axis=axis), method="percentile",
                               n_resamples=metrics.BOOTSTRAP_RESAMPLES,
                               random_state=np.random.default_rng(metrics.BOOTSTRAP_SEED)).confidence_interval
    s = metrics.summarize(graded)
    assert (s.ci_low, s.ci_high) == pytest.approx((expected.low, expected.high))
    assert metrics.summarize(graded) == s  # seeded: the same numbers on every run
    both = metrics.summarize_all({"a": graded, "b": [1.0] * 29 + [0.0]})
    assert both["a"] == s and both["b"].ci_high < 1.0


GRADED = pa.table({"qid": ["q1", "q1", "q1", "q2", "q3"], "docno": ["a", "b", "c", "d", "e"],
                   "relevance": pa.array([1, 2, 0, 1, 2], pa.int32())})


def test_min_relevance_sets_the_grade_binary_measures_count_and_leaves_ndcg_graded():
    run = _run([("q1", "a"), ("q1", "b"), ("q1", "c"), ("q2", "d"), ("q3", "x"), ("q3", "e")])
    qids = ["q1", "q2", "q3"]
    assert metrics.without_relevant(GRADED, qids, 2) == 1 and metrics.without_relevant(GRADED, qids, 1) == 0
    strict, loose = (metrics.per_query(run, GRADED, qids, [1, 3], min_relevance=r) for r in (2, 1))
    qrels = metrics.qrels_records(GRADED)
    scored = metrics.run_records(run)
    for name, measure in [("P@3", ir_measures.P(rel=2) @ 3), ("R@1", ir_measures.R(rel=2) @ 1),
                          ("RR@3", ir_measures.RR(rel=2) @ 3), ("AP@3", ir_measures.AP(rel=2) @ 3)]:
        expected = {m.query_id: m.value for m in ir_measures.iter_calc([measure], qrels, scored)}
        assert strict[name] == {q: pytest.approx(expected.get(q, 0.0)) for q in qids}, name
    assert strict["RR@3"] == {"q1": 0.5, "q2": 0.0, "q3": 0.5} and loose["RR@3"]["q1"] == 1.0
    assert strict["PerfectRecall@3"] == {"q1": 1.0, "q2": 0.0, "q3": 1.0}
    assert strict["nDCG@3"] == loose["nDCG@3"]  # grades are gains, whatever the threshold


def test_the_docs_name_both_gold_recall_as_the_perfect_recall_column():
    docs = Path(__file__).resolve().parents[3] / "docs"
    results = (docs / "results.md").read_text(encoding="utf-8")
    assert "*both-gold recall@k* is the benchmarker's `PerfectRecall@k` column" in " ".join(results.split())
    lines = results.splitlines()
    headers = [line for line, below in zip(lines, lines[1:]) if below.startswith("|---") and "both-gold" in line]
    assert headers and all("`PerfectRecall@10`" in line for line in headers), headers
    assert "`PerfectRecall@10` column" in " ".join((docs / "benchmarks.md").read_text(encoding="utf-8").split())


def test_tied_ranks_are_measured_in_the_runs_order_as_its_trec_file_reads(tmp_path):
    """A step that gives two rows one rank: the measures and the saved .trec file both keep the flow's order (the
    measures broke the tie by docno, descending, and reported other numbers than the file gives trec_eval)."""
    from flows.bench.runs import StoredRun, to_run

    result = pa.table({"qid": ["q1"] * 3 + ["q2"] * 2, "docno": ["x", "b", "a", "c", "z"],
                       "rank": [1, 1, 3, 1, 1]})
    run = to_run("tied", result)
    assert run.column("docno").to_pylist() == ["x", "b", "a", "c", "z"]
    assert run.column("rank").to_pylist() == [1, 2, 3, 1, 2]
    values = metrics.per_query(run, QRELS, ["q1", "q2"], [1, 3])
    assert values["P@1"] == {"q1": 0.0, "q2": 1.0} and values["RR@3"] == {"q1": 0.5, "q2": 1.0}
    trec = StoredRun(flow="tied", key="k", path=tmp_path / "tied.parquet", table=run, seconds=0.0,
                     cached=False).write_trec()
    from_file = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(
        [ir_measures.parse_measure("P@1"), ir_measures.parse_measure("RR@3")], metrics.qrels_records(QRELS),
        ir_measures.read_trec_run(str(trec))) if m.query_id != "q3"}
    assert from_file == {("q1", "P@1"): 0.0, ("q2", "P@1"): 1.0, ("q1", "RR@3"): 0.5, ("q2", "RR@3"): 1.0}


def test_a_row_without_a_rank_is_an_error_naming_its_query_and_document():
    from flows.bench.errors import BenchError
    from flows.bench.runs import to_run

    result = pa.table({"qid": ["q1", "q1", "q2"], "docno": ["a", "b", "c"], "rank": pa.array([1, None, 1], pa.int32())})
    with pytest.raises(BenchError, match=r"flow 'holes' returned 1 row\(s\) with no rank \(the first: query 'q1', "
                                         r"document 'b'\)"):
        to_run("holes", result)


def test_an_unanswered_query_scores_0_even_where_the_gold_answer_normalises_to_nothing():
    from flows.bench import answers

    values = answers.per_query({"q1": "The"}, {"q1": ["The"], "q2": ["The"]}, ["q1", "q2"])
    assert values["AnswerEM"] == {"q1": 1.0, "q2": 0.0} and values["AnswerF1"] == {"q1": 1.0, "q2": 0.0}
