"""An LLM step's actor pool on the Ray executor: does a step over a few dozen queries use all its actors?

``answer``: ``generate.answer`` (closed book, one call per query, one call at a time per process) over ``--queries``
queries against the local fault server's ``slow`` scenario (``--delay`` seconds a call), on its default pool of two
actors. ``bm25-answer`` (with ``--index DIR``): BM25's top 5 a query, their context, then the same answer step with
the documents; the retriever writes one block. ``no-model``, for the cost elsewhere: ``analyze.word_count`` then
``postprocess.reduce`` over 20 sample documents a query. Each run is a fresh process with its own local Ray
(``address: local``, 2 CPUs), timing ``executor.run`` only (actors started and set up inside it, as ``tessera run``
pays them), ``keep_history=False``, no step cache. ``--tree NAME=DIR`` runs a checkout of the code (``git archive REV
flows operators data/sample | tar -x -C DIR``) instead of this one; the trees alternate, ``--repeat`` times. An
answer step is ``queries x delay`` seconds of calls: one actor takes all of it, two actors half.

    nice -n 5 .venv/bin/python benchmarks/ray_llm_actors.py --tree before=/tmp/before --tree after=/tmp/after \
        [--queries 64] [--delay 0.5] [--repeat 2] [--flows answer bm25-answer no-model] [--index DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[1]

FLOWS = {
    "answer": {"answer": {"op": "generate.answer", "params": {
        "model": "fault-slow", "context_column": None, "concurrency": 1, "num_retries": 0}}},
    "bm25-answer": {"bm25": {"op": "retrieve.bm25", "params": {"k": 5}},  # the retriever writes one block
                    "context": {"op": "generate.context"},
                    "answer": {"op": "generate.answer", "params": {"model": "fault-slow", "concurrency": 1,
                                                                   "num_retries": 0}}},
    "no-model": {"words": {"op": "analyze.word_count"}, "top": {"op": "postprocess.reduce", "params": {"k": 5}}},
}


def child(flow_name: str, queries: int, index: str | None, verbose: bool = False) -> None:
    """One run in this process (its imports from ``PYTHONPATH``'s tree); prints the seconds as JSON."""
    import time

    import pyarrow as pa

    from flows.executors.ray_data import RayDataExecutor
    from flows.spec import FlowSpec
    from operators.testing import sample_documents

    table = pa.table({"qid": [f"q{i}" for i in range(queries)], "query": [f"what do bees make {i}?"
                                                                          for i in range(queries)]})
    if flow_name == "no-model":  # 20 sample documents a query, with ranks
        docs = sample_documents(200).to_pylist()
        rows = [{"qid": f"q{q}", "query": f"what do bees make {q}?", **docs[(q * 20 + r) % len(docs)],
                 "score": float(20 - r), "rank": r + 1} for q in range(queries) for r in range(20)]
        table = pa.Table.from_pylist(rows)
    executor = RayDataExecutor(keep_history=False, ray_init_kwargs={"address": "local", "num_cpus": 2})
    executor.start()
    started = time.perf_counter()
    spec = FlowSpec.parse({"name": flow_name, "steps": FLOWS[flow_name]})
    result = executor.run(spec.with_index(index) if index else spec, table)
    seconds = time.perf_counter() - started
    import ray

    worker_code = ray.get(ray.remote(lambda: __import__("flows").__file__).remote())  # the tree the workers run
    print(json.dumps({"seconds": seconds, "rows": result.table.num_rows, "code": worker_code,
                      "timings": {k: round(v["seconds"], 3) for k, v in result.timings.summary().items()
                                  if ":" in k and (verbose or not k.startswith("step:"))}}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=64)
    parser.add_argument("--delay", type=float, default=0.5)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--tree", action="append", default=[], help="NAME=DIR holding flows/ and operators/")
    parser.add_argument("--flows", nargs="+", choices=list(FLOWS), default=["answer", "no-model"])
    parser.add_argument("--index", help="an index for bm25-answer (tessera ingest data/sample/corpus.jsonl)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.queries, args.index, bool(os.environ.get("BENCH_VERBOSE")))

    sys.path.insert(0, str(REPO))
    from operators.llm.testing import KEY_ENV, FaultServer

    trees = dict(t.split("=", 1) for t in args.tree) or {"this": str(REPO)}
    seconds: dict[tuple[str, str], list[float]] = {}
    with FaultServer(delay=args.delay) as server, tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TESSERA_MODELS": str(server.models_file(Path(tmp) / "models.yaml")),
               KEY_ENV: "sk-bench", "TESSERA_HOME": tmp, "HF_HUB_OFFLINE": "1"}
        env.pop("RAY_ADDRESS", None)
        for _ in range(args.repeat):
            for name, tree in trees.items():
                for flow in args.flows:
                    server.reset()
                    done = subprocess.run([sys.executable, str(HERE), "--child", flow, "--queries", str(args.queries),
                                           *(["--index", args.index] if args.index else [])],
                                          env={**env, "PYTHONPATH": tree}, cwd=tree, capture_output=True, text=True)
                    if done.returncode:
                        sys.exit(f"{name} {flow} failed:\n{done.stderr[-3000:]}")
                    out = json.loads(done.stdout.strip().splitlines()[-1])
                    seconds.setdefault((name, flow), []).append(out["seconds"])
                    peak = server.peak if flow != "no-model" else "-"
                    print(f"{name:>8} {flow:>9}: {out['seconds']:6.2f} s, {out['rows']} rows, model calls at once: "
                          f"{peak}, {out['timings']}, workers ran {out['code']}", flush=True)
    print("median run seconds:")
    for (name, flow), values in sorted(seconds.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"  {flow:>9} {name:>8}: {statistics.median(values):6.2f} s  ({', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
