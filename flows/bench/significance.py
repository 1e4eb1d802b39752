"""Paired significance tests against baselines, with a multiple-comparison correction.

Pairing is by query id, never by position: both flows' per-query values are aligned
on the sorted qids (a qid a flow has no value for counts 0), so the order in which
queries were asked or results were stored changes no p-value. The test is scipy's
paired t-test (``ttest_rel``) or Wilcoxon signed-rank test (``wilcoxon``).

The correction (statsmodels ``multipletests``: holm, bonferroni, fdr_bh, or none)
runs once per baseline and measure over the comparisons of the *other* flows with
that baseline. The baseline is never compared with itself, so it neither enters the
family nor inflates its size (PyTerrier's ``Experiment`` got both wrong). A measure
only some flows have (the answer measures) is compared among those flows, over the
queries it covers (those with a gold answer); a baseline without it has no comparisons
on it.

Each comparison also carries a 95% interval of its Δ, the mean per-query difference, made as the measures' own
intervals are (``metrics.bootstrap_all``: a bootstrap percentile interval of the differences, on the same seed), so
a report can say how large a gain may be, not only whether it is there.
"""

from __future__ import annotations

import gc
import math
import warnings
from dataclasses import asdict, dataclass
from typing import Literal, Mapping, Sequence

import numpy as np

from flows.bench.metrics import bootstrap_all

Test = Literal["t", "wilcoxon"]
Correction = Literal["holm", "bonferroni", "fdr_bh", "none"]
TESTS: tuple[str, ...] = ("t", "wilcoxon")
CORRECTIONS: tuple[str, ...] = ("holm", "bonferroni", "fdr_bh", "none")


@dataclass(frozen=True)
class Comparison:
    baseline: str
    flow: str
    measure: str
    baseline_mean: float
    flow_mean: float
    delta: float  # mean of (flow - baseline) per query
    delta_low: float  # 95% interval of delta (metrics.bootstrap_all of the per-query differences)
    delta_high: float
    p: float
    p_corrected: float
    wins: int
    losses: int
    ties: int
    n: int

    def to_dict(self) -> dict:
        return asdict(self)


def aligned(baseline: Mapping[str, float], system: Mapping[str, float],
            qids: Sequence[str] | None = None) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Both flows' values on the same sorted qids (given, or the union of both); missing = 0."""
    keys = sorted(set(baseline) | set(system)) if qids is None else sorted(set(qids))
    a = np.array([float(baseline.get(q, 0.0)) for q in keys])
    b = np.array([float(system.get(q, 0.0)) for q in keys])
    return keys, a, b


def paired_p(a: np.ndarray, b: np.ndarray, test: Test = "t") -> float:
    """Two-sided p-value of the paired test of b against a; 1.0 when every pair is equal. NaN (no test, left out
    of the correction) for a t-test when every pair differs by the same amount: the differences have no variance,
    so t is undefined (scipy answers 0.0 with a precision warning); the Wilcoxon test still answers then."""
    from scipy import stats

    diff = b - a
    if diff.size < 2:
        return math.nan
    if not np.any(diff):
        return 1.0
    if test == "t":
        if np.allclose(diff, diff[0], rtol=1e-9, atol=1e-12):  # the same difference, up to float rounding
            return math.nan
        with warnings.catch_warnings():  # nearly equal differences: scipy's precision note, not the user's concern
            warnings.simplefilter("ignore", RuntimeWarning)
            return float(stats.ttest_rel(b, a).pvalue)
    if test == "wilcoxon":
        return float(stats.wilcoxon(b, a).pvalue)
    raise ValueError(f"unknown test '{test}' (use one of {', '.join(TESTS)})")


def correct(pvalues: Sequence[float], method: Correction = "holm") -> list[float]:
    """Corrected p-values (statsmodels); NaN p-values stay NaN and are not in the family."""
    from statsmodels.stats.multitest import multipletests

    out = [float(p) for p in pvalues]
    if method == "none":
        return out
    index = [i for i, p in enumerate(out) if not math.isnan(p)]
    if index:
        # statsmodels' holm calls gc.collect(), a quarter second per call in a process
        # that imported MLflow, matplotlib and pandas; frozen objects are not scanned.
        gc.freeze()
        try:
            corrected = multipletests([out[i] for i in index], method=method)[1]
        finally:
            gc.unfreeze()
        for i, p in zip(index, corrected):
            out[i] = float(p)
    return out


def compare(per_query: Mapping[str, Mapping[str, Mapping[str, float]]], baselines: Sequence[str],
            measures: Sequence[str], *, qids: Sequence[str] | None = None, test: Test = "t",
            correction: Correction = "holm") -> list[Comparison]:
    """Every other flow against every baseline, per measure; ``per_query`` is ``{flow: {measure: {qid: v}}}``."""
    rows: list[Comparison] = []
    for baseline in baselines:
        for measure in measures:
            if measure not in per_query[baseline]:
                continue
            family = []
            for flow in (f for f in per_query if f != baseline and measure in per_query[f]):
                base, other = per_query[baseline][measure], per_query[flow][measure]
                covered = None if qids is None else [q for q in qids if q in base or q in other]
                _, a, b = aligned(base, other, covered)
                family.append((flow, a, b, paired_p(a, b, test)))
            corrected = correct([p for *_, p in family], correction)
            intervals = bootstrap_all({flow: b - a for flow, a, b, _ in family})
            for (flow, a, b, p), pc in zip(family, corrected):
                rows.append(Comparison(
                    baseline=baseline, flow=flow, measure=measure, baseline_mean=float(a.mean()),
                    flow_mean=float(b.mean()), delta=float((b - a).mean()), delta_low=intervals[flow].ci_low,
                    delta_high=intervals[flow].ci_high, p=p, p_corrected=pc,
                    wins=int(np.sum(b > a)), losses=int(np.sum(b < a)), ties=int(np.sum(b == a)), n=int(a.size)))
    return rows
