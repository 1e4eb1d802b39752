"""Many queries at once: the torch-free query encoder against sentence-transformers, in one process.

``query_encoder_startup.py`` measures what the torch-free path saves on one query (torch's imports); this
measures what it costs per query in a batch run (``tessera run`` or ``bench`` over a query file), where the
imports are paid once: the same ``--queries`` real questions (SciFact, HotpotQA, MuSiQue from ../shared/data)
encoded ``--rounds`` times by each, alternating, both on the process's default threads. Prints wall and CPU
seconds per round and the largest difference between the two sets of vectors.

The ONNX export must exist in ``$TESSERA_HOME`` (``tessera ingest`` of an index with vectors makes it).

    TESSERA_HOME=H nice -n 10 .venv/bin/python benchmarks/query_encoder_batch.py [--queries 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from _common import DATA

SETS = ("scifact", "hotpotqa_dev_subset", "musique_dev_subset")


def real_queries(n: int) -> list[str]:
    texts: list[str] = []
    for name in SETS:
        with open(DATA / name / "queries.jsonl", encoding="utf-8") as f:
            texts += [q["text"] for q in map(json.loads, f) if q.get("text")]
    return (texts * (n // len(texts) + 1))[:n]


def timed(encode, texts: list[str]) -> tuple[np.ndarray, float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    vectors = encode(texts)
    return vectors, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from operators.models.batching import CPU_BATCH
    from operators.models.onnx_query_encoder import load_onnx_query_encoder
    from operators.models.sentence_transformers import load_sentence_transformer

    texts = real_queries(args.queries)
    onnx = load_onnx_query_encoder(args.model)  # FastPathUnavailable says why when the export is missing
    torch_model = load_sentence_transformer(args.model)
    sides = {"onnx": onnx.encode,
             "torch": lambda t: torch_model.encode(t, batch_size=CPU_BATCH, normalize_embeddings=True)}
    seen: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(sides)[::-1]
        vectors = {}
        for name in order:
            vectors[name], wall, cpu = timed(sides[name], texts)
            seen[name].append((wall, cpu))
        diff = float(np.abs(vectors["onnx"] - vectors["torch"]).max())
        cells = [f"{n} wall {seen[n][-1][0]:.2f} s, CPU {seen[n][-1][1]:.2f} s" for n in sides]
        print(f"round {r + 1}: {' | '.join(cells)} | max |diff| {diff:.1e} | load {os.getloadavg()[0]:.1f}", flush=True)
    med = {n: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for n, v in seen.items()}
    print(f"medians, {args.queries} queries: onnx {med['onnx'][0]:.2f} s wall, {med['onnx'][1]:.2f} s CPU; torch "
          f"{med['torch'][0]:.2f} s wall, {med['torch'][1]:.2f} s CPU; onnx/torch CPU "
          f"{med['onnx'][1] / med['torch'][1]:.2f}")


if __name__ == "__main__":
    main()
