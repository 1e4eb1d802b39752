"""What sharding costs at query time: the same corpus as 4 shards vs 1, side by side.

Data: data/sample/corpus.jsonl (1,000 docs) by default, ``--corpus scifact`` (5,183
docs) or ``--corpus wordnet`` (117,659 glosses) from ../shared/data, with real
all-MiniLM-L6-v2 vectors (``title. text``, cached under ~/.cache/tessera-bench by
benchmarks/_common.py). Both indices are built in a temporary folder; queries are
document titles (BM25) and held-in document vectors perturbed with noise (dense). Each
query is one call (k=10), the two indices are timed interleaved, ``--rounds`` passes,
each query keeping its fastest pass (the machine is shared); the median over queries is
reported with the 4-shard/1-shard ratio. Last, the results are compared: BM25 scores
must be identical, dense top-10 equal.

    .venv/bin/python benchmarks/shard_merge.py
    .venv/bin/python benchmarks/shard_merge.py --corpus scifact --dense-type hnsw
    .venv/bin/python benchmarks/shard_merge.py --corpus wordnet     # where search, not fan-out, dominates
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from _common import REPO_ROOT, SCIFACT, WORDNET, encode_corpus, read_beir_corpus  # noqa: E402  (sets sys.path)


def build(path: Path, n_shards: int, ids, titles, texts, vectors, dense_type: str):
    import pyarrow as pa

    from operators.embed.sentence_transformer import vectors_to_arrow
    from operators.store import Index, IndexSettings

    index = Index.create(path, IndexSettings(dense_type=dense_type))
    table = pa.table({"docno": ids, "doc_id": ids, "title": titles, "text": texts,
                      "vector": vectors_to_arrow(vectors)})
    size = -(-len(ids) // n_shards)
    index.commit([index.write_shard(f"s{i}", table.slice(i * size, size)) for i in range(n_shards)])
    return index


def timed(fn, calls, rounds):
    best = np.full(len(calls), np.inf)
    for _ in range(rounds):
        for i, arg in enumerate(calls):
            start = time.perf_counter()
            fn(arg)
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("sample", "scifact", "wordnet"), default="sample")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dense-type", default="flat")
    args = parser.parse_args()
    path = {"sample": REPO_ROOT / "data" / "sample" / "corpus.jsonl", "scifact": SCIFACT,
            "wordnet": WORDNET}[args.corpus]
    ids, titles, texts = read_beir_corpus(path)
    vectors = encode_corpus(path)
    rng = np.random.default_rng(0)
    picked = rng.choice(len(ids), size=min(args.queries, len(ids)), replace=False)
    bm25_queries = [titles[i] or texts[i][:60] for i in picked]
    noisy = vectors[picked] + 0.05 * rng.normal(size=(len(picked), vectors.shape[1])).astype(np.float32)
    dense_queries = (noisy / np.linalg.norm(noisy, axis=1, keepdims=True)).astype(np.float32)

    with tempfile.TemporaryDirectory() as tmp:
        indices = {n: build(Path(tmp) / f"x{n}", n, ids, titles, texts, vectors, args.dense_type) for n in (1, 4)}
        for index in indices.values():  # load shards and BM25 statistics outside the timing
            index.search_bm25(["warm up"], k=10), index.search_dense(dense_queries[:1], k=10)
        print(f"{args.corpus}: {len(ids)} docs, {len(picked)} queries, k=10, dense={args.dense_type}, "
              f"best of {args.rounds} rounds per query")
        print(f"{'':8}{'1 shard p50':>14}{'4 shards p50':>14}{'ratio':>8}")
        for kind in ("bm25", "dense"):
            calls = bm25_queries if kind == "bm25" else list(dense_queries[:, None, :])
            fns = {n: (lambda q, ix=ix: ix.search_bm25([q], k=10)) if kind == "bm25"
                   else (lambda v, ix=ix: ix.search_dense(v, k=10)) for n, ix in indices.items()}
            best = {n: np.full(len(calls), np.inf) for n in fns}
            for _ in range(args.rounds):  # interleaved, so load changes hit both alike
                for n, fn in fns.items():
                    best[n] = np.minimum(best[n], timed(fn, calls, 1))
            p50 = {n: float(np.median(b)) * 1000 for n, b in best.items()}
            print(f"{kind:8}{p50[1]:>11.3f} ms{p50[4]:>11.3f} ms{p50[4] / p50[1]:>8.2f}")
        one, four = indices[1], indices[4]
        same_bm25 = all(np.array_equal(a.scores, b.scores) for a, b in
                        zip(one.search_bm25(bm25_queries, k=10), four.search_bm25(bm25_queries, k=10)))
        same_dense = all(a.docnos == b.docnos for a, b in
                         zip(one.search_dense(dense_queries, k=10), four.search_dense(dense_queries, k=10)))
        print(f"identical results: bm25 scores {same_bm25}, dense top-10 {same_dense}")


if __name__ == "__main__":
    main()
