"""Latency of one search: ``POST /v1/search`` on the Serve app vs the same flow in-process, side by side.

Queries: the sample's four, then titles of its documents. Both sides run the built-in ``hybrid`` flow (BM25 + MiniLM dense, RRF) cut to the top
``--top-k`` over the sample index (the one ``make demo`` builds; ingested into the
benchmark cache when absent), one query at a time, interleaved query by query so a
noisy neighbour hits both alike. The in-process side is ``Index.search`` (the same flow
and cut, with torch on as many threads as the replica: one); the Serve side is the real
app (``serve.app:build_app``) on 127.0.0.1, whose replica runs the flow with the local
executor. Prints p50/p95 of each side, the p95
ratio (goal: Serve <= 1.5x in-process) and whether both return the same documents.

    .venv/bin/python benchmarks/serve_search_latency.py [--index PATH] [--requests 100]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import tempfile
import time
from pathlib import Path

from _common import CACHE, REPO_ROOT, print_side_by_side

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

SAMPLE = REPO_ROOT / "data" / "sample"


def sample_index(path: Path | None) -> Path:
    """The given index, the demo's if `make demo` built it, else the sample ingested once into the cache."""
    from flows.api import ingest

    for candidate in (path, REPO_ROOT / ".tessera" / "indices" / "sample"):
        if candidate is not None and (candidate / "manifest.json").is_file():
            return candidate
    target = CACHE / "sample-index"
    ingest(SAMPLE / "corpus.jsonl", target, shard_size=250, progress=False)  # resumes: a no-op once built
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", type=Path, default=None, help="index folder (default: the sample index)")
    parser.add_argument("--flow", default="hybrid", help="built-in flow searched (default hybrid)")
    parser.add_argument("--top-k", type=int, default=10, help="hits per query")
    parser.add_argument("--requests", type=int, default=100, help="timed requests per side")
    parser.add_argument("--warmup", type=int, default=5, help="untimed requests per side first")
    parser.add_argument("--threads", type=int, default=1, help="torch threads in-process (the replica's: 1)")
    args = parser.parse_args()

    import ray
    import requests
    from ray import serve

    from flows.api import Index
    from serve.app import build_app

    import torch

    # The replica runs torch on one thread (Ray sets OMP_NUM_THREADS from its num_cpus, 0 here, so 1); the same
    # here, or the in-process side measures torch's thread count (on 2 busy cores, 2 threads were 8x slower).
    torch.set_num_threads(args.threads)
    index_path = sample_index(args.index)
    index = Index.open(index_path)
    queries = [json.loads(line)["text"] for line in open(SAMPLE / "queries.jsonl", encoding="utf-8")]
    queries += [json.loads(line)["title"] for line in open(SAMPLE / "corpus.jsonl", encoding="utf-8")][:200]
    jobs = [queries[i % len(queries)] for i in range(args.warmup + args.requests)]

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.ERROR)
    serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config={"log_level": "WARNING"})
    store = Path(tempfile.mkdtemp(prefix="tessera-bench-")) / "tasks.db"
    started = time.perf_counter()
    serve.run(build_app({"models": [], "service": {"default_index": str(index_path), "task_store": f"sqlite:///{store}"}}),
              name="tessera", route_prefix="/", logging_config={"log_level": "WARNING"})
    print(f"serve app ready in {time.perf_counter() - started:.0f} s; flow {args.flow}, top {args.top_k}, index "
          f"{index_path} ({len(index)} chunks); {args.requests} timed requests per side")

    url = f"http://127.0.0.1:{port}/v1/search"
    session = requests.Session()
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
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
