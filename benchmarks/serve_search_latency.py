"""Latency of one search: ``POST /v1/search`` on the Serve app vs the same flow in-process, side by side.

Queries: the sample's four, then titles of its documents. Both sides run the built-in
``hybrid`` flow (BM25 + MiniLM dense, RRF) cut to the top ``--top-k`` over the sample
index (the one ``make demo`` builds; ingested into the benchmark cache when absent), one
query at a time, interleaved query by query so a noisy neighbour hits both alike. The
in-process side is ``Index.search`` (the same flow and cut, with torch on as many threads
as the replica: one); the Serve side is the real app (``serve.app:build_app``) on
127.0.0.1, whose replica runs the flow with the local executor. Prints p50/p95 of each
side, the p95 ratio (goal: Serve <= 1.5x in-process) and whether both return the same
documents.

    .venv/bin/python benchmarks/serve_search_latency.py [--index PATH] [--requests 100]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from _common import print_side_by_side
from _serve import SAMPLE, sample_index, serve_app

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, default=None, help="index folder (default: the sample index)")
    parser.add_argument("--flow", default="hybrid", help="built-in flow searched (default hybrid)")
    parser.add_argument("--top-k", type=int, default=10, help="hits per query")
    parser.add_argument("--requests", type=int, default=100, help="timed requests per side")
    parser.add_argument("--warmup", type=int, default=5, help="untimed requests per side first")
    parser.add_argument("--threads", type=int, default=1, help="torch threads in-process (the replica's: 1)")
    args = parser.parse_args()

    import requests
    import torch

    from flows.api import Index

    # The replica runs torch on one thread (Ray sets OMP_NUM_THREADS from its num_cpus, 0 here, so 1); the same
    # here, or the in-process side measures torch's thread count (on 2 busy cores, 2 threads were 8x slower).
    torch.set_num_threads(args.threads)
    index_path = sample_index(args.index)
    index = Index.open(index_path)
    queries = [json.loads(line)["text"] for line in open(SAMPLE / "queries.jsonl", encoding="utf-8")]
    queries += [json.loads(line)["title"] for line in open(SAMPLE / "corpus.jsonl", encoding="utf-8")][:200]
    jobs = [queries[i % len(queries)] for i in range(args.warmup + args.requests)]
    with serve_app(index_path) as base:
        print(f"flow {args.flow}, top {args.top_k}, {len(index)} chunks; {args.requests} timed requests per side")
        measure(args, index, jobs, f"{base}/v1/search", requests.Session())


def measure(args: argparse.Namespace, index, jobs: list[str], url: str, session) -> None:
    local_s, served_s, same = [], [], 0
    for i, query in enumerate(jobs):
        start = time.perf_counter()
        local = index.search(query, k=args.top_k, method=args.flow).column("docno").to_pylist()
        local_time = time.perf_counter() - start
        start = time.perf_counter()
        response = session.post(url, json={"flow": args.flow, "query": query, "top_k": args.top_k}, timeout=600)
        served_time = time.perf_counter() - start
        response.raise_for_status()
        if i < args.warmup:
            continue
        local_s.append(local_time)
        served_s.append(served_time)
        same += local == [hit["docno"] for hit in response.json()["results"][0]["hits"]]

    print_side_by_side("in-process (Index.search)", local_s, "Serve HTTP /v1/search", served_s)
    print(f"same documents in {same}/{len(local_s)} requests")


if __name__ == "__main__":
    main()
