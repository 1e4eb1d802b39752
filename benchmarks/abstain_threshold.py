"""Where to set ``generate.answer``'s ``min_relevance``: the best dense cosine among the rows that ``rag`` (or
``rag_multihop``, ``--flow``) puts in its context, for questions the index answers and for questions it does not.

Three indices, the same questions (a multi-hop dev subset's, which name their gold passages):

* **covered**: the benchmarker's index of the dataset's own corpus (the question's gold passages are in it);
* **gold removed**: a copy of it with every question's gold passages deleted (the distractor paragraphs the
  dataset chose to look like them stay: the hardest case, an index on the subject that lacks the fact);
* **elsewhere**: an index of other documents (default: ``make demo``'s sample of 1,000 Wikipedia articles), as a
  user asks about something their documents do not cover.

The relevance is what ``min_relevance`` reads: the largest ``score_dense`` of the 5 rows the flow's retrieval keeps
(its steps before ``context``; in ``rag_multihop`` only the rows the question's own dense search found have one).
For each threshold it prints the share of covered questions still answered and of the others declined, and the ROC
AUC of the score between covered and each other index::

    .venv/bin/python benchmarks/abstain_threshold.py [--dataset ../shared/data/hotpotqa_dev_subset] [--limit 300]
        [--flow rag_multihop]
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np

from _common import DATA, REPO_ROOT

def retrieval(flow: str) -> dict:
    """The built-in answer flow ``flow`` up to its context: the steps whose rows ``min_relevance`` reads."""
    import yaml

    from flows.store import builtin_path

    steps = yaml.safe_load(builtin_path(flow).read_text(encoding="utf-8"))["steps"]
    ids = list(steps)
    return {"name": f"{flow}_retrieval", "steps": {step: steps[step] for step in ids[:ids.index("context")]}}


def relevance(spec: dict, index: Path, questions: list[str]) -> np.ndarray:
    """Each question's best ``score_dense`` among its 5 rows (0 where none has one)."""
    from flows.api import Flow, Index

    table = Flow.load(spec, index=Index.open(str(index))).run(
        questions, keep_history=False).table.to_pandas()
    best = table.groupby("qid")["score_dense"].max().fillna(0.0)
    return np.array([best.get(str(n + 1), 0.0) for n in range(len(questions))])


def without_gold(index: Path, dataset: Path, into: Path) -> Path:
    """A copy of ``index`` with the documents the dataset's qrels judge relevant deleted."""
    from operators.store import Index

    with open(dataset / "qrels" / "test.tsv", encoding="utf-8") as f:
        gold = {row["corpus-id"] for row in csv.DictReader(f, delimiter="\t")}
    shutil.copytree(index, into)
    Index.open(into).delete(doc_ids=sorted(gold))
    return into


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATA / "hotpotqa_dev_subset")
    parser.add_argument("--elsewhere", type=Path, default=REPO_ROOT / ".tessera" / "indices" / "sample",
                        help="an index that does not cover the dataset (default: make demo's sample)")
    parser.add_argument("--limit", type=int, default=300, help="questions, the first of queries.jsonl")
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.35, 0.4, 0.45, 0.5])
    parser.add_argument("--flow", default="rag", choices=["rag", "rag_multihop"], help="whose retrieval")
    args = parser.parse_args()

    from sklearn.metrics import roc_auc_score

    from flows.bench.dataset import load_dataset
    from flows.bench.indices import default_root, ensure_index, plan_index
    from flows.spec import FlowSpec

    if not (args.elsewhere / "manifest.json").is_file():
        raise SystemExit(f"no index at {args.elsewhere}: run make demo, or pass --elsewhere")
    with open(args.dataset / "queries.jsonl", encoding="utf-8") as f:
        questions = [json.loads(line)["text"] for line in f if line.strip()][:args.limit]
    dataset = load_dataset(args.dataset)
    spec = retrieval(args.flow)
    plan = plan_index(FlowSpec.parse(spec), dataset.corpus_sha256(), default_root())
    ensure_index(plan, dataset.corpus)
    with tempfile.TemporaryDirectory() as scratch:
        scores = {"covered": relevance(spec, plan.path, questions),
                  "gold removed": relevance(spec, without_gold(plan.path, args.dataset, Path(scratch) / "no-gold"),
                                            questions),
                  "elsewhere": relevance(spec, args.elsewhere, questions)}
    covered = scores["covered"]
    print(f"{len(questions)} questions of {args.dataset.name}; best score_dense of {args.flow}'s 5 rows")
    for name, values in scores.items():
        print(f"  {name:13s} median {np.median(values):.3f}  5th-95th percentile "
              f"{np.percentile(values, 5):.3f}-{np.percentile(values, 95):.3f}")
    for name in ("gold removed", "elsewhere"):
        other = scores[name]
        auc = roc_auc_score([1] * len(covered) + [0] * len(other), np.concatenate([covered, other]))
        print(f"  ROC AUC, covered against {name}: {auc:.3f}")
    print("min_relevance | covered answered | gold removed declined | elsewhere declined")
    for t in args.thresholds:
        print(f"{t:13.2f} | {np.mean(covered >= t):16.3f} | {np.mean(scores['gold removed'] < t):21.3f} | "
              f"{np.mean(scores['elsewhere'] < t):18.3f}")


if __name__ == "__main__":
    main()
