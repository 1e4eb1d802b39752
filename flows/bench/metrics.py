"""Per-query measures at every cutoff, from ir-measures; means with 95% confidence intervals.

At each cutoff k: ``nDCG@k``, ``RR@k`` (its mean is MRR), ``AP@k`` (MAP), ``P@k``,
``R@k`` (ir-measures, pytrec_eval backend), and two measures derived from the
library's per-query P and R values: ``F1@k`` = 2PR/(P+R), and ``PerfectRecall@k`` = 1
when every relevant document of the query is in the top k (R@k = 1), else 0 (on
HotpotQA, the *both-gold recall@k*).

Relevance: nDCG takes the judgements' grades as gains; the binary measures count a
document relevant when its grade is at least ``min_relevance`` (1 by default; TREC DL
uses 2), ir-measures' ``rel=`` parameter.

Documents are ordered by the flow's ``rank`` (ir-measures gets ``-rank`` as the
score), so ties in score keep the flow's order. Every evaluated query gets a value
for every measure: a query the flow returned nothing for scores 0.

Intervals stay inside the values' range, so inside [0, 1]: Wilson's score interval when
every per-query value is 0 or 1 (the mean is a proportion), else a bootstrap percentile
interval of the mean.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

KINDS = ("nDCG", "RR", "AP", "P", "R", "F1", "PerfectRecall")
_LIBRARY_KINDS = ("nDCG", "RR", "AP", "P", "R")


def measure_names(ks: list[int]) -> list[str]:
    """Every measure name, grouped by kind, cutoffs ascending."""
    return [f"{kind}@{k}" for kind in KINDS for k in sorted(ks)]


def library_measures(ks: list[int], min_relevance: int = 1) -> dict:
    """``{ir-measures measure: our name}``; the binary measures count grades >= ``min_relevance`` (``rel=``)."""
    import ir_measures

    found = {}
    for kind in _LIBRARY_KINDS:
        rel = f"(rel={min_relevance})" if kind != "nDCG" and min_relevance != 1 else ""
        for k in sorted(ks):
            found[ir_measures.parse_measure(f"{kind}{rel}@{k}")] = f"{kind}@{k}"
    return found


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


def without_relevant(qrels: pa.Table, qids: list[str], min_relevance: int) -> int:
    """How many of the queries have no document judged ``min_relevance`` or above."""
    return len(queries_without_relevant(qrels, qids, min_relevance))


def queries_without_relevant(qrels: pa.Table, qids: list[str], min_relevance: int) -> list[str]:
    """The queries (in ``qids``' order) with no document judged ``min_relevance`` or above."""
    import pyarrow.compute as pc

    relevant = set(qrels.filter(pc.greater_equal(qrels.column("relevance"), min_relevance)).column("qid").to_pylist())
    return [q for q in qids if q not in relevant]


def per_query(run: pa.Table, qrels: pa.Table, qids: list[str], ks: list[int],
              min_relevance: int = 1) -> dict[str, dict[str, float]]:
    """``{measure: {qid: value}}`` for every evaluated qid and every measure (missing = 0)."""
    import ir_measures

    values: dict[str, dict[str, float]] = {name: dict.fromkeys(qids, 0.0) for name in measure_names(ks)}
    wanted = set(qids)
    names = library_measures(ks, min_relevance)
    for m in ir_measures.iter_calc(list(names), qrels_records(qrels), run_records(run)):
        if m.query_id in wanted:
            values[names[m.measure]][m.query_id] = float(m.value)
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


#: Resamples of the bootstrap interval, and its seed: a rerun writes the same intervals.
BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED = 2000, 0
#: Values held at once while resampling (rows x resamples x queries), about 80 MB.
_BOOTSTRAP_BUDGET = 10_000_000


def summarize(values: list[float] | np.ndarray, confidence: float = 0.95) -> Summary:
    """One measure's mean and confidence interval (see ``summarize_all``)."""
    return summarize_all({"": values}, confidence)[""]


def summarize_all(by_measure: dict[str, Any], confidence: float = 0.95) -> dict[str, Summary]:
    """Each measure's mean and a confidence interval inside its values' range (a t interval crosses 1
    near 1): Wilson's for 0/1 values (statsmodels), else a bootstrap percentile interval (scipy), one
    resampling of the queries shared by the measures, which all have the same queries."""
    found: dict[str, Summary] = {}
    resampled: dict[str, np.ndarray] = {}
    for name, values in by_measure.items():
        x = np.asarray(list(values.values()) if isinstance(values, dict) else values, dtype=float)
        mean = float(x.mean()) if x.size else 0.0
        if x.size and np.isin(x, (0.0, 1.0)).all():
            from statsmodels.stats.proportion import proportion_confint

            low, high = proportion_confint(int(x.sum()), x.size, alpha=1 - confidence, method="wilson")
            # statsmodels' bound for all ones is 0.9999999999999999: keep the interval around the mean
            found[name] = Summary(mean, min(float(low), mean), max(float(high), mean), int(x.size))
        else:
            resampled[name] = x
    found.update(bootstrap_all(resampled, confidence))
    return {name: found[name] for name in by_measure}


def bootstrap_all(by_name: dict[str, np.ndarray], confidence: float = 0.95) -> dict[str, Summary]:
    """Each array's mean and bootstrap percentile interval, one resampling shared by the arrays of one size (the
    same queries); an array of equal values (or of one) has the interval [mean, mean]. ``significance`` uses it for
    the per-query differences of two flows, where 0/1 values are no proportion."""
    found: dict[str, Summary] = {}
    resampled: dict[str, np.ndarray] = {}
    for name, x in by_name.items():
        mean = float(x.mean()) if x.size else 0.0
        if x.size < 2 or float(np.ptp(x)) == 0.0:  # all equal (std can be 1e-17 off zero)
            found[name] = Summary(mean, mean, mean, int(x.size))
        else:
            resampled[name] = x
    for n in {x.size for x in resampled.values()}:
        names = [name for name, x in resampled.items() if x.size == n]
        found.update(_bootstrap(names, np.stack([resampled[name] for name in names]), confidence))
    return {name: found[name] for name in by_name}


def _bootstrap(names: list[str], rows: np.ndarray, confidence: float) -> dict[str, Summary]:
    from scipy import stats

    batch = max(1, _BOOTSTRAP_BUDGET // rows.size)
    ci = stats.bootstrap((rows,), np.mean, axis=-1, confidence_level=confidence, method="percentile",
                         n_resamples=BOOTSTRAP_RESAMPLES, batch=batch,
                         random_state=np.random.default_rng(BOOTSTRAP_SEED)).confidence_interval
    return {name: Summary(float(row.mean()), float(low), float(high), row.size)
            for name, row, low, high in zip(names, rows, ci.low, ci.high)}


def per_query_table(flow: str, values: dict[str, dict[str, float]], texts: dict[str, str]) -> pa.Table:
    """Long table ``flow, qid, query, measure, value``; ``texts``: each qid's query text, so a row says which query
    it is without the dataset beside it."""
    flows, qids, queries, names, vals = [], [], [], [], []
    for name, by_qid in values.items():
        for qid, value in by_qid.items():
            flows.append(flow)
            qids.append(qid)
            queries.append(texts.get(qid))
            names.append(name)
            vals.append(value)
    return pa.table({"flow": pa.array(flows, pa.string()), "qid": pa.array(qids, pa.string()),
                     "query": pa.array(queries, pa.string()), "measure": pa.array(names, pa.string()),
                     "value": pa.array(vals, pa.float64())})
