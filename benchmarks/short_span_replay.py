"""Replays ``short_span`` (generate.answer's ``style: short``) on the model replies a benchmark saved, without running
the model again. Each answered query's ``raw_response`` (per-query metadata in the step cache of a ``tessera bench``
run, its ``--cache-dir``, which holds every query answered so far, also of an interrupted run) is read as the answer
step reads it (``parse_answer``, then ``short_span`` with the question) by the code checked out now, and scored
against the gold answers with the benchmark's own AnswerF1/AnswerEM (``flows.bench.answers``), beside the ``answer``
the benchmark recorded (what the code of its day showed). A query without an answer (degraded) scores 0 both ways.

It prints the mean F1 and EM of both, how many answers changed, and (``--show``) the changed ones::

    .venv/bin/python benchmarks/short_span_replay.py --cache CACHE_DIR \\
        --dataset ../shared/data/hotpotqa_dev_subset [--show]

The cache is read from a copy (the benchmark may still be writing it); give each dataset's benchmark a cache of its
own, as the replies are found by query id.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import tempfile
from contextlib import closing
from pathlib import Path

from _common import REPO_ROOT  # noqa: F401  (puts the repository on sys.path)


def saved_answers(cache: Path) -> dict[str, dict]:
    """``{qid: metadata}`` of every query the step cache in ``cache`` holds a model reply for."""
    if not (cache / "index.sqlite").is_file():
        raise SystemExit(f"{cache} is not a step cache (no index.sqlite): give tessera bench's --cache-dir")
    found: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for part in cache.glob("index.sqlite*"):
            shutil.copy(part, Path(tmp) / part.name)
        with closing(sqlite3.connect(Path(tmp) / "index.sqlite")) as db:
            for (meta,) in db.execute("SELECT meta FROM units WHERE meta LIKE '%raw_response%'"):
                found.update({qid: v for qid, v in json.loads(meta).items() if "raw_response" in v})
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, required=True, help="the step cache of a tessera bench run")
    parser.add_argument("--dataset", type=Path, required=True, help="its dataset (questions.jsonl, queries.jsonl)")
    parser.add_argument("--show", action="store_true", help="print each changed answer")
    args = parser.parse_args()

    from flows.bench.answers import load_gold, scores
    from operators.generate.answer import parse_answer
    from operators.generate.short_answer import short_span

    with open(args.dataset / "queries.jsonl", encoding="utf-8") as f:
        questions = {str(q["_id"]): q["text"] for q in map(json.loads, filter(str.strip, f))}
    saved = saved_answers(args.cache)
    gold = load_gold(args.dataset / "questions.jsonl", list(saved))
    rows, changed = [], 0
    for qid, meta in saved.items():
        if qid not in gold or meta.get("abstained"):
            continue
        old = meta.get("answer")
        new = short_span(parse_answer(meta["raw_response"], 5)["answer"], questions[qid]) if old is not None else None
        rows.append((scores(old, gold[qid]) if old is not None else (0.0, 0.0),
                     scores(new, gold[qid]) if new is not None else (0.0, 0.0)))
        if old != new:
            changed += 1
            if args.show:
                print(f"{qid}: {questions[qid]}\n  reply {meta['raw_response']!r}\n  old   {old!r}  "
                      f"F1 {rows[-1][0][1]:.3f}\n  new   {new!r}  F1 {rows[-1][1][1]:.3f}\n  gold  {gold[qid]}")
    n = len(rows)
    for name, pick in (("recorded", 0), ("replayed", 1)):
        f1, em = (sum(r[pick][m] for r in rows) / n for m in (1, 0))
        print(f"{name}: AnswerF1 {f1:.4f}  AnswerEM {em:.4f}")
    print(f"{n} questions with a gold answer, {changed} answers changed")


if __name__ == "__main__":
    main()
