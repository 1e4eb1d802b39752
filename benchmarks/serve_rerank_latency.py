"""Latency of reranking 100 candidates: the rerank.cross_encoder operator in-process vs Serve HTTP /v1/rerank.

Both sides score the same SciFact texts (``title\\ntext``, 100 per query) with the same
checkpoint, one request at a time, interleaved query by query so a noisy neighbour
hits both alike. The Serve side is the real app (``serve.app:build_app``) on
127.0.0.1 with one cross-encoder replica holding as many CPUs as this process uses
for torch. Prints p50/p95 of each side, the ratio (goal: Serve p95 <= 1.5x in-process)
and whether both rank identically.

    .venv/bin/python benchmarks/serve_rerank_latency.py [--model PATH] [--requests 20]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np

from _common import CACHE, DATA, print_side_by_side, read_beir_corpus

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="CrossEncoder checkpoint (default: the untrained-head one, "
                        "built once under the benchmark cache)")
    parser.add_argument("--data", type=Path, default=DATA / "scifact", help="BEIR folder (corpus/queries.jsonl)")
    parser.add_argument("--candidates", type=int, default=100, help="documents reranked per request")
    parser.add_argument("--requests", type=int, default=20, help="timed requests per side")
    parser.add_argument("--warmup", type=int, default=2, help="untimed requests per side first")
    parser.add_argument("--max-length", type=int, default=None,
                        help="token limit per (query, document) pair (default: the checkpoint's, 512 for MiniLM)")
    parser.add_argument("--replica-cpus", type=float, default=None,
                        help="CPUs of the Serve replica (default: torch's thread count here)")
    args = parser.parse_args()
    if not (args.data / "corpus.jsonl").is_file():
        sys.exit(f"no BEIR corpus at {args.data}: pass --data (the shared evaluation data is not on this machine)")

    import pyarrow as pa
    import ray
    import requests
    import torch
    from ray import serve

    from operators import create
    from operators.testing import untrained_cross_encoder
    from serve.app import build_app

    model = args.model or str(untrained_cross_encoder(CACHE / "untrained-cross-encoder"))
    ids, titles, texts = read_beir_corpus(args.data / "corpus.jsonl")
    queries = [json.loads(line)["text"] for line in open(args.data / "queries.jsonl", encoding="utf-8")]
    n = args.warmup + args.requests
    rng = np.random.default_rng(0)
    jobs = []
    for i in range(n):
        pick = rng.choice(len(ids), size=args.candidates, replace=False)
        jobs.append((queries[i % len(queries)], [f"{titles[j]}\n{texts[j]}" if titles[j] else texts[j] for j in pick]))

    threads = torch.get_num_threads()
    replica_cpus = args.replica_cpus or float(threads)
    params = {"model": model, "max_length": args.max_length}
    op = create("rerank.cross_encoder", {**params, "n": None, "title_column": None})
    op.ensure_setup()

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ray.init(num_cpus=max(2, int(np.ceil(replica_cpus))), include_dashboard=False, logging_level=logging.ERROR)
    serve.start(http_options={"host": "127.0.0.1", "port": port}, logging_config={"log_level": "WARNING"})
    started = time.perf_counter()
    gpus = 1 if torch.cuda.is_available() else 0  # the replica runs where the in-process side does
    serve.run(build_app({"models": [{"name": "ce", "op": "rerank.cross_encoder", "params": params,
                                     "num_cpus": replica_cpus, "num_gpus": gpus}]}),
              name="tessera", route_prefix="/", logging_config={"log_level": "WARNING"})
    print(f"serve app ready in {time.perf_counter() - started:.0f} s; torch threads here {threads}, "
          f"replica CPUs {replica_cpus:g}; max_length {op.model.max_seq_length}; {args.candidates} candidates, "
          f"{args.requests} timed requests per side")

    url = f"http://127.0.0.1:{port}/v1/rerank"
    session = requests.Session()
    local_s, served_s, same_order, max_diff = [], [], 0, 0.0
    for i, (query, docs) in enumerate(jobs):
        table = pa.table({"qid": ["q"] * len(docs), "query": [query] * len(docs),
                          "docno": [str(k) for k in range(len(docs))], "text": docs,
                          "rank": pa.array(np.arange(1, len(docs) + 1), pa.int32())})
        start = time.perf_counter()
        out = op(table)
        local = time.perf_counter() - start
        start = time.perf_counter()
        response = session.post(url, json={"model": "ce", "query": query, "documents": docs}, timeout=600)
        served = time.perf_counter() - start
        response.raise_for_status()
        results = response.json()["results"]
        if i < args.warmup:
            continue
        local_s.append(local)
        served_s.append(served)
        local_order = [int(d) for d in out.column("docno").to_pylist()]
        same_order += local_order == [r["index"] for r in results]
        local_scores = dict(zip(local_order, out.column("score").to_pylist()))
        max_diff = max(max_diff, max(abs(local_scores[r["index"]] - r["relevance_score"]) for r in results))

    print_side_by_side("in-process (operator)", local_s, "Serve HTTP /v1/rerank", served_s)
    print(f"identical ranking in {same_order}/{len(local_s)} requests; max |score difference| {max_diff:.2e}")
    serve.shutdown()
    ray.shutdown()


if __name__ == "__main__":
    main()
