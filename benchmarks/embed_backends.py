"""CPU embedding backends side by side: docs/s and SciFact nDCG@10 of each.

Encodes the SciFact corpus (``title. text``, 5,183 documents, or ``--limit``) with
all-MiniLM-L6-v2 through each backend of ``operators.models.load_sentence_transformer``
(torch, onnx, onnx-int8), then ranks the SciFact test queries by exact dense search
(inner product of L2-normalised vectors, top 100) over each backend's vectors and
scores nDCG@10 with ir_measures. The rule the numbers decide: offer a backend when it
is faster and ranks the same (|ΔnDCG@10| <= 0.005 against torch).

To be fair on a shared machine, the corpus is encoded in chunks taken in turn by
each backend (round robin), so a burst of load from elsewhere hits every backend
alike; each backend's docs/s is its texts over its summed encode seconds. Loading
(and, on first use, the ONNX export into ``$TESSERA_HOME``) is timed apart.

    python benchmarks/embed_backends.py                 # full SciFact, all backends
    python benchmarks/embed_backends.py --limit 1000 --backends torch,onnx
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from _common import DATA, embedded_texts, read_beir_corpus  # noqa: F401  (also puts the repo on sys.path)

MAX_DELTA = 0.005


def ndcg10(doc_vectors, query_vectors, docnos, qids, qrels) -> float:
    import ir_measures
    from ir_measures import nDCG

    scores = query_vectors @ doc_vectors.T
    k = min(100, len(docnos))
    top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    run = {qid: {docnos[j]: float(scores[i, j]) for j in top[i]} for i, qid in enumerate(qids)}
    return float(ir_measures.calc_aggregate([nDCG @ 10], qrels, run)[nDCG @ 10])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default=str(DATA / "scifact"),
                        help="BEIR folder (corpus, queries, qrels/test.tsv)")
    parser.add_argument("--limit", type=int, default=None, help="first N documents only (nDCG then is indicative)")
    parser.add_argument("--backends", default="torch,onnx,onnx-int8", help="comma-separated; torch is the baseline")
    parser.add_argument("--batch-size", type=int, default=64, help="texts per forward pass")
    parser.add_argument("--chunk", type=int, default=256, help="texts per round-robin turn")
    parser.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = parser.parse_args()

    from pathlib import Path

    from operators.models import load_sentence_transformer

    folder = Path(args.dataset)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if backends[0] != "torch":
        backends = ["torch", *[b for b in backends if b != "torch"]]
    docnos, titles, texts = read_beir_corpus(folder / "corpus.jsonl", args.limit)
    sentences = embedded_texts(titles, texts)
    from flows.bench.dataset import load_dataset

    dataset = load_dataset(folder, split="test")  # the judged test queries, in file order
    qids, query_texts = dataset.qids, dataset.queries.column("query").to_pylist()
    qrels: dict[str, dict[str, int]] = {}
    for qid, docno, relevance in zip(*(dataset.qrels.column(c).to_pylist() for c in ("qid", "docno", "relevance"))):
        qrels.setdefault(qid, {})[docno] = int(relevance)
    print(f"{folder.name}: {len(sentences)} documents, {len(qids)} test queries; backends {backends}", flush=True)

    models, load_s = {}, {}
    for backend in backends:
        start = time.perf_counter()
        models[backend] = load_sentence_transformer(backend=backend)
        models[backend].encode(sentences[:8], batch_size=args.batch_size)  # warm up
        load_s[backend] = time.perf_counter() - start

    def encode(backend, batch):
        return models[backend].encode(batch, batch_size=args.batch_size, normalize_embeddings=True,
                                      convert_to_numpy=True, show_progress_bar=False).astype(np.float32)

    parts = {b: [] for b in backends}
    seconds = dict.fromkeys(backends, 0.0)
    for turn, lo in enumerate(range(0, len(sentences), args.chunk)):
        chunk = sentences[lo:lo + args.chunk]
        order = backends[turn % len(backends):] + backends[:turn % len(backends)]  # rotate who goes first
        for backend in order:
            start = time.perf_counter()
            parts[backend].append(encode(backend, chunk))
            seconds[backend] += time.perf_counter() - start
        print(f"  {lo + len(chunk)}/{len(sentences)}", end="\r", flush=True)
    print()

    rows = []
    base_vectors = np.concatenate(parts["torch"])
    for backend in backends:
        doc_vectors = np.concatenate(parts[backend])
        query_vectors = encode(backend, query_texts)
        cosine = np.sum(doc_vectors * base_vectors, axis=1)
        rows.append({
            "backend": backend, "load_s": round(load_s[backend], 1),
            "docs_per_s": len(sentences) / seconds[backend], "encode_s": seconds[backend],
            "min_cos_vs_torch": float(cosine.min()), "mean_cos_vs_torch": float(cosine.mean()),
            "ndcg10": ndcg10(doc_vectors, query_vectors, docnos, qids, qrels),
        })
    base = rows[0]
    print(f"{'backend':<10} {'load s':>7} {'docs/s':>8} {'speedup':>8} {'min cos':>8} {'nDCG@10':>8} "
          f"{'ΔnDCG@10':>9}  offer")
    for row in rows:
        row["speedup"] = row["docs_per_s"] / base["docs_per_s"]
        row["delta_ndcg10"] = row["ndcg10"] - base["ndcg10"]
        row["offer"] = row["backend"] == "torch" or (abs(row["delta_ndcg10"]) <= MAX_DELTA and row["speedup"] > 1)
        print(f"{row['backend']:<10} {row['load_s']:>7.1f} {row['docs_per_s']:>8.1f} {row['speedup']:>7.2f}x "
              f"{row['min_cos_vs_torch']:>8.4f} {row['ndcg10']:>8.4f} {row['delta_ndcg10']:>+9.4f}  "
              f"{'yes' if row['offer'] else 'no'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"documents": len(sentences), "queries": len(qids), "rows": rows},
                                              indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
