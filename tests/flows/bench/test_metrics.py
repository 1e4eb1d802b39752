"""Measures from ir-measures, and the two derived from its per-query P and R."""

from __future__ import annotations

import ir_measures
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


def test_summary_confidence_interval_contains_the_mean():
    s = metrics.summarize([0.0, 1.0, 1.0, 0.5])
    assert s.ci_low < s.mean == 0.625 < s.ci_high and s.n == 4
    flat = metrics.summarize([0.3, 0.3])
    assert flat.ci_low == flat.ci_high == 0.3
