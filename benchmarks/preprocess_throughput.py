"""Local vs Ray Data executor on a CPU-bound 3-step preprocessing flow.

Reads the WordNet gloss corpus (117,659 documents) from ../shared/data, removes
stopwords, stems and counts words, on both executors in one run (this machine is
shared and noisy, so only the ratio measured side by side means much), and prints
docs/s for each and their ratio. The step cache is off: this measures compute.

    .venv/bin/python benchmarks/preprocess_throughput.py [--limit N] [--repeat R]
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


def flow(limit: int | None, splits: int, batch_size: int) -> FlowSpec:
    read = {"path": str(CORPUS), "num_splits": splits}
    if limit:
        read["limit"] = limit
    return FlowSpec.parse({"name": "preprocess-bench", "steps": {
        "read": {"op": "sources.jsonl", "params": read},
        "stopwords": {"op": "preprocess.stopwords", "params": {"output_column": "clean"}, "batch_size": batch_size},
        "stem": {"op": "preprocess.stem", "params": {"input_column": "clean"}, "batch_size": batch_size},
        "words": {"op": "analyze.word_count", "params": {"input_column": "clean"}, "batch_size": batch_size},
    }})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="read only the first N documents")
    parser.add_argument("--repeat", type=int, default=2, help="runs per executor (best is reported)")
    parser.add_argument("--batch-size", type=int, default=8192)
    args = parser.parse_args()
    if not CORPUS.is_file():
        raise SystemExit(f"corpus not found: {CORPUS}")
    import ray

    cpus = os.cpu_count() or 2
    ray.init(num_cpus=cpus, include_dashboard=False, logging_level=logging.WARNING)
    runs = {
        "local": (LocalExecutor(keep_history=False), flow(args.limit, 1, args.batch_size)),
        "ray": (RayDataExecutor(keep_history=False), flow(args.limit, cpus, args.batch_size)),
    }
    best: dict[str, float] = {}
    rows = 0
    for _ in range(args.repeat):
        for name, (executor, spec) in runs.items():  # interleaved, so noise hits both
            start = time.perf_counter()
            result = executor.run(spec)
            seconds = time.perf_counter() - start
            rows = result.table.num_rows
            best[name] = min(best.get(name, float("inf")), seconds)
            print(f"{name:5s} {rows} docs in {seconds:6.2f} s = {rows / seconds:8.0f} docs/s")
    local, distributed = rows / best["local"], rows / best["ray"]
    print(f"\nbest of {args.repeat}: local {local:.0f} docs/s, ray {distributed:.0f} docs/s, "
          f"ray/local = {distributed / local:.2f} (goal >= 1.0 on {cpus} cores)")
    ray.shutdown()


if __name__ == "__main__":
    main()
