"""Cross-encoder reranking of 100 candidates: the rerank.cross_encoder operator vs CrossEncoder.predict.

Goal: throughput through the operator >= 0.9 x calling ``CrossEncoder.predict``
directly on the same (query, title + text) pairs. For ``--queries`` SciFact test
queries, the candidates are ``--candidates`` corpus documents (the same for both
sides; which ones does not change the cost); the two sides alternate query by query,
``--repeat`` passes, so a noisy neighbour hits both alike. Prints the per-query
medians, their ratio and whether both rank identically.

    .venv/bin/python benchmarks/rerank_overhead.py [--model PATH_OR_NAME] [--queries 20] [--candidates 100]

Without ``--model`` an untrained-head MiniLM cross-encoder is used (timing does not
depend on the weights).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
DATA = REPO.parent / "shared" / "data" / "scifact"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="CrossEncoder reference (default: an untrained-head MiniLM)")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    import torch

    from operators import create
    from operators.models import load_cross_encoder
    from operators.models.batching import forward_batch_size
    from operators.testing import untrained_cross_encoder

    model_ref = args.model or str(untrained_cross_encoder(Path(tempfile.gettempdir()) / "tessera-bench-ce"))
    with open(DATA / "queries.jsonl", encoding="utf-8") as f:
        queries = [json.loads(line) for line in f][: args.queries]
    with open(DATA / "corpus.jsonl", encoding="utf-8") as f:
        docs = [json.loads(line) for _, line in zip(range(args.candidates), f)]
    model = load_cross_encoder(model_ref)
    batch = forward_batch_size(None, model)  # the operator's default, on both sides
    op = create("rerank.cross_encoder", {"model": model_ref, "n": args.candidates, "predict_batch_size": batch})
    op.ensure_setup()
    texts = [f"{d['title']}\n{d['text']}" if d.get("title") else d["text"] for d in docs]

    def table(q):
        n = len(docs)
        return pa.table({"qid": [q["_id"]] * n, "query": [q["text"]] * n, "docno": [d["_id"] for d in docs],
                         "title": [d.get("title", "") for d in docs], "text": [d["text"] for d in docs],
                         "score": np.arange(n, 0, -1, dtype=np.float64), "rank": np.arange(1, n + 1, dtype=np.int32)})

    tables = [table(q) for q in queries]
    op(tables[0])  # warm both paths
    direct_times, operator_times, same = [], [], 0
    for _ in range(args.repeat):
        for q, t in zip(queries, tables):
            start = time.perf_counter()
            scores = model.predict([(q["text"], x) for x in texts], batch_size=batch, activation_fn=torch.nn.Identity(),
                                   show_progress_bar=False, convert_to_numpy=True)
            order = [docs[i]["_id"] for i in np.lexsort((np.array([d["_id"] for d in docs]), -scores))]
            direct_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            out = op(t)
            operator_times.append(time.perf_counter() - start)
            same += out.column("docno").to_pylist() == order
    direct, through = statistics.median(direct_times), statistics.median(operator_times)
    print(f"{len(queries)} queries x {len(docs)} candidates, {args.repeat} passes, torch threads "
          f"{torch.get_num_threads()}")
    print(f"CrossEncoder.predict median {direct * 1000:.1f} ms/query; operator median {through * 1000:.1f} ms/query")
    ratio = direct / through
    print(f"operator/direct throughput = {ratio:.3f} (goal >= 0.9: {'met' if ratio >= 0.9 else 'MISSED'}); "
          f"identical ranking on {same}/{len(direct_times)} calls")


if __name__ == "__main__":
    main()
