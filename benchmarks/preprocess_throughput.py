"""Local vs Ray Data executor on a CPU-bound 3-step preprocessing flow.

Reads the WordNet gloss corpus (117,659 documents) from ../shared/data, removes
stopwords, stems and counts words, on both executors in one run (this machine is
shared and noisy, so only the ratio measured side by side means much), and prints
docs/s for each and their ratio. The step cache is off: this measures compute.

``--actors`` adds a third run: the same Ray flow with ``concurrency`` set on each step,
which puts the steps on actor pools started for every run instead of tasks on running
workers (``flows.executors.ray_plan.runs_as_tasks``); on a small ``--limit`` that measures start-up.
``--history`` keeps every step's output, so each step is a Ray stage of its own (a pool
each with ``--actors``).

    .venv/bin/python benchmarks/preprocess_throughput.py [--limit N] [--repeat R] [--actors] [--history]
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path

from flows.executors.local import LocalExecutor
from flows.executors.ray_data import RayDataExecutor
from flows.spec import FlowSpec

CORPUS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "wordnet30_glosses" / "corpus.jsonl"


def flow(limit: int | None, splits: int, batch_size: int, actors: int | None = None) -> FlowSpec:
    """The flow; ``actors`` sets every step's ``concurrency``, so each runs on an actor pool of that size."""
    read = {"path": str(CORPUS), "num_splits": splits}
    if limit:
        read["limit"] = limit
    steps = {
        "read": {"op": "sources.jsonl", "params": read},
        "stopwords": {"op": "preprocess.stopwords", "params": {"output_column": "clean"}, "batch_size": batch_size},
        "stem": {"op": "preprocess.stem", "params": {"input_column": "clean"}, "batch_size": batch_size},
        "words": {"op": "analyze.word_count", "params": {"input_column": "clean"}, "batch_size": batch_size},
    }
    if actors:
        for step in steps.values():
            step["concurrency"] = actors
    return FlowSpec.parse({"name": "preprocess-bench", "steps": steps})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="read only the first N documents")
    parser.add_argument("--repeat", type=int, default=2, help="runs per executor (best is reported)")
    parser.add_argument("--batch-size", type=int, default=8192)
    parser.add_argument("--actors", action="store_true", help="also run the Ray flow with every step on an actor pool")
    parser.add_argument("--history", action="store_true",
                        help="keep every step's output (one Ray stage per step) instead of fusing the chain")
    args = parser.parse_args()
    if not CORPUS.is_file():
        raise SystemExit(f"corpus not found: {CORPUS}")
    import ray

    cpus = os.cpu_count() or 2
    ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)
    runs = {
        "local": (LocalExecutor(keep_history=args.history), flow(args.limit, 1, args.batch_size)),
        "ray": (RayDataExecutor(keep_history=args.history), flow(args.limit, cpus, args.batch_size)),
    }
    if args.actors:
        runs["ray-actors"] = (RayDataExecutor(keep_history=args.history), flow(args.limit, cpus, args.batch_size, cpus))
    best: dict[str, float] = {}
    rows = 0
    for _ in range(args.repeat):
        for name, (executor, spec) in runs.items():  # interleaved, so noise hits both
            start = time.perf_counter()
            result = executor.run(spec)
            seconds = time.perf_counter() - start
            rows = result.table.num_rows
            best[name] = min(best.get(name, float("inf")), seconds)
            print(f"{name:10s} {rows} docs in {seconds:6.2f} s = {rows / seconds:8.0f} docs/s")
    local, distributed = rows / best["local"], rows / best["ray"]
    print(f"\nbest of {args.repeat}: local {local:.0f} docs/s, ray {distributed:.0f} docs/s, "
          f"ray/local = {distributed / local:.2f} (goal >= 1.0 on {cpus} cores)")
    if args.actors:
        print(f"ray with actor pools: {best['ray-actors']:.2f} s against {best['ray']:.2f} s as tasks "
              f"(tasks {best['ray-actors'] / best['ray']:.2f}x faster)")
    ray.shutdown()


if __name__ == "__main__":
    main()
