"""``report.md`` with PNG plots: metric bars with 95% CIs, per-query deltas against each baseline.

The headline cutoff is 10 when it is among the cutoffs, else the largest. Markers in
the headline table compare with the first baseline: ▲ significantly better, ▼ worse
(corrected p < 0.05).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from flows.bench import answers, metrics
from operators.atomic import write_text

if TYPE_CHECKING:
    from flows.bench.results import BenchResult

ALPHA = 0.05
LABELS = {"nDCG": "nDCG", "RR": "MRR", "AP": "MAP", "P": "P", "R": "Recall", "F1": "F1",
          "PerfectRecall": "Perfect recall"}


def column_label(measure: str, between: str = " ") -> str:
    """``MRR@10`` for ``RR@10``, with the name that bench.json, metrics.json and the CSVs give it (ir-measures')
    after ``between`` where the two differ: the table's number is found in the files by that name."""
    kind, at, cutoff = measure.partition("@")
    label = f"{LABELS.get(kind, kind)}{at}{cutoff}"
    return label if label == measure else f"{label}{between}({measure})"


def headline_k(ks: list[int]) -> int:
    return 10 if 10 in ks else max(ks)


def write_report(result: "BenchResult", out: Path) -> dict[str, Path]:
    k = headline_k(result.ks)
    files = {"metrics.png": _bars_plot(result, k, out / "metrics.png")}
    for baseline in result.baselines:
        if len(result.flows) > 1:
            files[f"deltas_{baseline}.png"] = _delta_plot(result, baseline, f"nDCG@{k}", out / f"deltas_{baseline}.png")
    for stale in set(out.glob("deltas_*.png")) - set(files.values()):  # an earlier run's baselines: not this report's
        stale.unlink(missing_ok=True)
    files["report.md"] = write_text(out / "report.md", _markdown(result, k, files))
    return files


def significance_mark(result: "BenchResult", flow: str, measure: str) -> str:
    """" ▲" or " ▼" where ``flow`` is significantly better or worse than the first baseline on ``measure``
    (corrected p < ``ALPHA``), else ""; the report's tables and the command's summary mark alike."""
    c = next((c for c in result.comparisons
              if (c.baseline, c.flow, c.measure) == (result.baselines[0], flow, measure)), None)
    if c is None or c.p_corrected != c.p_corrected or c.p_corrected >= ALPHA:
        return ""
    return " ▲" if c.delta > 0 else " ▼"


def marks_legend(result: "BenchResult") -> str:
    """What the marks mean ("" with one flow: nothing is compared)."""
    if len(result.flows) < 2:
        return ""
    return f"▲/▼: significantly better/worse than {result.baselines[0]} (corrected p < {ALPHA})."


def _fmt(x: float) -> str:
    return "nan" if x != x else f"{x:.4f}"


def _p(x: float) -> str:
    return "–" if x != x else (f"{x:.2e}" if x < 1e-3 else f"{x:.4f}")


def _markdown(result: "BenchResult", k: int, files: dict[str, Path]) -> str:
    d, o = result.dataset, result.options
    lines = [f"# Benchmark: {d.name} ({d.split})", "",
             f"{len(d.qids)} judged queries{d.unjudged_note()}, {d.qrels.num_rows} judgements; "
             f"cutoffs {', '.join(map(str, result.ks))}; "
             f"baseline{'s' if len(result.baselines) > 1 else ''} {', '.join(result.baselines)}; "
             f"{'paired t-test' if o.test == 't' else 'Wilcoxon signed-rank test'}, "
             f"correction {o.correction} (per baseline and measure, over the other flows); relevant: judged "
             f"{o.min_relevance} or above (nDCG uses the grades as gains).", "",
             f"## Results at k={k}", "",
             "Mean [95% CI]. " + marks_legend(result), ""]
    kinds = metrics.KINDS
    lines.append("| flow | " + " | ".join(column_label(f"{x}@{k}") for x in kinds) + " |")
    lines.append("|---|" + "---|" * len(kinds))
    for flow in result.flows:
        cells = []
        for kind in kinds:
            m = f"{kind}@{k}"
            s = result.summaries[flow][m]
            cells.append(f"{_fmt(s.mean)} [{s.ci_low:.3f}, {s.ci_high:.3f}]{significance_mark(result, flow, m)}")
        lines.append(f"| {flow} | " + " | ".join(cells) + " |")
    lines += ["", "![metrics](metrics.png)", "", "## Every measure", "",
              "| measure | " + " | ".join(result.flows) + " |", "|---|" + "---|" * len(result.flows)]
    for m in result.measures:
        lines.append(f"| {m} | " + " | ".join(_fmt(result.summaries[f][m].mean) if m in result.summaries[f]
                                              else "–" for f in result.flows) + " |")
    lines += ["", "RR is reciprocal rank (its mean is MRR), AP average precision (its mean is MAP); "
              "PerfectRecall@k is the share of queries with every relevant document in the top k.", ""]
    lines += _answer_section(result)
    if len(result.flows) > 1:
        lines += [f"## Significance at k={k}", "",
                  "| baseline | flow | measure | Δ mean [95% CI] | p | corrected p | wins / losses / ties |",
                  "|---|---|---|---|---|---|---|"]
        for c in result.comparisons:
            if c.measure.endswith(f"@{k}") or c.measure in answers.MEASURES:
                lines.append(f"| {c.baseline} | {c.flow} | {c.measure} | {c.delta:+.4f} [{c.delta_low:+.3f}, "
                             f"{c.delta_high:+.3f}] | {_p(c.p)} | "
                             f"{_p(c.p_corrected)} | {c.wins} / {c.losses} / {c.ties} |")
        untested = any(c.p != c.p for c in result.comparisons)
        lines += ["", *(["A p of – is no test: fewer than two queries, or, for the t-test, every query's difference "
                         "the same (no variance; `--test wilcoxon` answers then).", ""] if untested else []),
                  "Every measure and cutoff: `significance.csv`.", ""]
        for baseline in result.baselines:
            lines += [f"Per-query nDCG@{k} differences against {baseline}:", "",
                      f"![deltas against {baseline}](deltas_{baseline}.png)", ""]
    lines += ["## Runs", "", "| flow | spec | run | seconds | results | index |", "|---|---|---|---|---|---|"]
    for name, fr in result.flows.items():
        index = "–" if fr.index is None else (f"`{fr.index.key[:12]}` ({'dense + ' if fr.index.dense else ''}bm25"
                                               f"{', built now' if fr.index_built else ''})")
        status = "cached" if fr.run.cached else "ran"
        lines.append(f"| {name} | `{fr.source}` | {status}: `{fr.run.path.name}` | {fr.run.seconds:.1f}"
                     f"{fr.run.from_step_cache} | "
                     f"{fr.run.table.num_rows} | {index} |")
    if result.warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in result.warnings]
    lines += ["", "Files: `metrics.json`, `metrics.csv`, `per_query.parquet`, `significance.csv`, `bench.json`, "
              "`runs/`.", ""]
    return "\n".join(lines)


def _answer_section(result: "BenchResult") -> list[str]:
    """The answer measures of the flows that answer (none: no section)."""
    flows = [f for f in result.flows if any(m in result.summaries[f] for m in answers.MEASURES)]
    if not flows:
        return []
    first = result.baselines[0]
    lines = ["## Answers", "", "Exact match and token F1 against the dataset's answers (SQuAD normalisation, the "
             "best over the aliases), mean [95% CI] over the queries with a gold answer."
             + (f" ▲/▼ against {first} as above." if any(m in result.summaries[first] for m in answers.MEASURES)
                else ""), "", "| flow | " + " | ".join(answers.MEASURES) + " |",
             "|---|" + "---|" * len(answers.MEASURES)]
    for flow in flows:
        cells = []
        for m in answers.MEASURES:
            s = result.summaries[flow][m]
            cells.append(f"{_fmt(s.mean)} [{s.ci_low:.3f}, {s.ci_high:.3f}]{significance_mark(result, flow, m)} "
                         f"(n {s.n})")
        lines.append(f"| {flow} | " + " | ".join(cells) + " |")
    return lines + [""]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _bars_plot(result: "BenchResult", k: int, path: Path) -> Path:
    plt = _pyplot()
    kinds = list(metrics.KINDS)
    flows = list(result.flows)
    width = 0.8 / len(flows)
    x = np.arange(len(kinds))
    fig, ax = plt.subplots(figsize=(max(7, 1.3 * len(kinds) + 0.4 * len(flows)), 4.2))
    for i, flow in enumerate(flows):
        s = [result.summaries[flow][f"{kind}@{k}"] for kind in kinds]
        means = np.array([v.mean for v in s])
        err = np.array([[v.mean - v.ci_low for v in s], [v.ci_high - v.mean for v in s]])
        ax.bar(x + (i - (len(flows) - 1) / 2) * width, means, width, yerr=err, capsize=3, label=flow)
    ax.set_xticks(x, [f"{LABELS[kind]}@{k}" for kind in kinds], rotation=20)
    ax.set_ylim(0, 1)
    ax.set_ylabel("mean (95% CI)")
    ax.set_title(f"{result.dataset.name} ({result.dataset.split}), {len(result.dataset.qids)} queries")
    ax.legend(fontsize="small")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _delta_plot(result: "BenchResult", baseline: str, measure: str, path: Path) -> Path:
    plt = _pyplot()
    others = [f for f in result.flows if f != baseline]
    fig, axes = plt.subplots(len(others), 1, figsize=(8, 2.6 * len(others)), squeeze=False)
    base = result.per_query[baseline][measure]
    for ax, flow in zip(axes[:, 0], others):
        values = result.per_query[flow][measure]
        qids = sorted(base)
        delta = np.sort(np.array([values.get(q, 0.0) - base[q] for q in qids]))[::-1]
        colors = np.where(delta > 0, "tab:green", np.where(delta < 0, "tab:red", "tab:gray"))
        ax.bar(np.arange(delta.size), delta, width=1.0, color=colors)
        ax.axhline(0, color="black", linewidth=0.6)
        wins, losses = int(np.sum(delta > 0)), int(np.sum(delta < 0))
        ax.set_title(f"{flow} − {baseline}: {measure} per query (wins {wins}, losses {losses}, "
                     f"ties {delta.size - wins - losses})", fontsize="medium")
        ax.set_xlim(-0.5, delta.size - 0.5)
        ax.set_ylim(-1.05, 1.05)
        ax.set_xticks([])
        ax.set_ylabel("Δ")
    axes[-1, 0].set_xlabel("queries, sorted by difference")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
