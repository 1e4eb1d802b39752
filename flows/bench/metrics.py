"""Per-query measures at every cutoff, from ir-measures; means with 95% confidence intervals.

At each cutoff k: ``nDCG@k``, ``RR@k`` (its mean is MRR), ``AP@k`` (MAP), ``P@k``,
``R@k`` (ir-measures, pytrec_eval backend), and two measures derived from the
library's per-query P and R values: ``F1@k`` = 2PR/(P+R), and ``PerfectRecall@k`` = 1
when every relevant document of the query is in the top k (R@k = 1), else 0.

Documents are ordered by the flow's ``rank`` (ir-measures gets ``-rank`` as the
score), so ties in score keep the flow's order. Every evaluated query gets a value
for every measure: a query the flow returned nothing for scores 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

KINDS = ("nDCG", "RR", "AP", "P", "R", "F1", "PerfectRecall")
_LIBRARY_KINDS = ("nDCG", "RR", "AP", "P", "R")


def measure_names(ks: list[int]) -> list[str]:
    """Every measure name, grouped by kind, cutoffs ascending."""
    return [f"{kind}@{k}" for kind in KINDS for k in sorted(ks)]


def library_measures(ks: list[int]) -> list:
    import ir_measures

    return [ir_measures.parse_measure(f"{kind}@{k}") for kind in _LIBRARY_KINDS for k in sorted(ks)]


def qrels_records(qrels: pa.Table) -> list:
    import ir_measures

    return [ir_measures.Qrel(q, d, int(r)) for q, d, r in zip(qrels.column("qid").to_pylist(),
                                                           qrels.column("docno").to_pylist(),
                                                           qrels.column("relevance").to_pylist())]


def run_records(run: pa.Table) -> list:
    """ir-measures scored docs ordered by rank (score = -rank)."""
    import ir_measures

    return [ir_measures.ScoredDoc(q, d, -float(r)) for q, d, r in zip(run.column("qid").to_pylist(),
                                                                     run.column("docno").to_pylist(),
                                                                     run.column("rank").to_pylist())]


def per_query(run: pa.Table, qrels: pa.Table, qids: list[str], ks: list[int]) -> dict[str, dict[str, float]]:
    """``{measure: {qid: value}}`` for every evaluated qid and every measure (missing = 0)."""
    import ir_measures

    values: dict[str, dict[str, float]] = {name: dict.fromkeys(qids, 0.0) for name in measure_names(ks)}
    wanted = set(qids)
    for m in ir_measures.iter_calc(library_measures(ks), qrels_records(qrels), run_records(run)):
        if m.query_id in wanted:
            values[str(m.measure)][m.query_id] = float(m.value)
    for k in ks:
        p, r = values[f"P@{k}"], values[f"R@{k}"]
        for q in qids:
            total = p[q] + r[q]
            values[f"F1@{k}"][q] = 2 * p[q] * r[q] / total if total > 0 else 0.0
            values[f"PerfectRecall@{k}"][q] = 1.0 if r[q] >= 1.0 - 1e-9 else 0.0
    return values


@dataclass(frozen=True)
class Summary:
    mean: float
    ci_low: float
    ci_high: float
    n: int


def summarize(values: list[float] | np.ndarray, confidence: float = 0.95) -> Summary:
    """The mean and its t-distribution confidence interval (scipy)."""
    from scipy import stats

    x = np.asarray(values, dtype=float)
    mean = float(x.mean()) if x.size else 0.0
    if x.size < 2 or float(x.std()) == 0.0:
        return Summary(mean, mean, mean, int(x.size))
    low, high = stats.t.interval(confidence, x.size - 1, loc=mean, scale=stats.sem(x))
    return Summary(mean, float(low), float(high), int(x.size))


def per_query_table(flow: str, values: dict[str, dict[str, float]]) -> pa.Table:
    """Long table ``flow, qid, measure, value``."""
    flows, qids, names, vals = [], [], [], []
    for name, by_qid in values.items():
        for qid, value in by_qid.items():
            flows.append(flow)
            qids.append(qid)
            names.append(name)
            vals.append(value)
    return pa.table({"flow": pa.array(flows, pa.string()), "qid": pa.array(qids, pa.string()),
                     "measure": pa.array(names, pa.string()), "value": pa.array(vals, pa.float64())})
