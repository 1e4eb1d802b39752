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
    .venv/bin/python benchmarks/shard_merge.py --index INDEX        # an ingested index as it is (916K: 184 shards)

With ``--index``, an ingested index is searched as it is, with real questions (benchmarks/_common.py's
QUERY_SETS; dense queries embedded with the index's encoder): BM25 and dense p50/p95 for one query per
call and the cost per query in batches of ``--batch``, the resident memory the loaded index adds, and the
sharded dense search against one FAISS flat index over the same vectors (the merge's cost; same top-10).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

# as in ann_1m.py: on a shared machine spinning OpenMP threads starve
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from _common import (REPO_ROOT, SCIFACT, WORDNET, encode_corpus, encode_queries, index_vectors,  # noqa: E402
                     checked_args, latency_summary, read_beir_corpus, real_queries, rss_bytes, run)


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


def ingested(args: argparse.Namespace) -> None:
    """Search an ingested index as it is: latency one query per call and in batches, memory, merge cost."""
    import faiss

    from operators.store import Index

    queries = real_queries(args.queries)
    vectors = encode_queries(args.index, queries)
    before = rss_bytes()
    started = time.perf_counter()
    index = Index.open(args.index)
    index.search_bm25(["warm up"], k=10), index.search_dense(vectors[:1], k=10)  # loads every shard
    print(f"{args.index}: {len(index):,} chunks in {len(index.manifest.shards)} shards, loaded in "
          f"{time.perf_counter() - started:.1f} s, +{(rss_bytes() - before) / 1e9:.2f} GB RSS; {len(queries)} real "
          f"queries, k=10, best of {args.rounds} rounds per call")
    exact = faiss.IndexFlatIP(vectors.shape[1])
    exact.add(index_vectors(args.index))
    batches = [slice(i, i + args.batch) for i in range(0, len(queries), args.batch)]
    calls = {"bm25": (lambda q: index.search_bm25([queries[q]], k=10), lambda b: index.search_bm25(queries[b], k=10)),
             "dense (sharded)": (lambda q: index.search_dense(vectors[q:q + 1], k=10),
                                 lambda b: index.search_dense(vectors[b], k=10)),
             "dense (one flat)": (lambda q: exact.search(vectors[q:q + 1], 10), lambda b: exact.search(vectors[b], 10))}
    print(f"{'':18}{'p50 ms':>9}{'p95 ms':>9}{f'batch of {args.batch}, ms/query':>26}")
    for name, (one, batch) in calls.items():
        single = latency_summary(timed(one, list(range(len(queries))), args.rounds))
        per_query = float(np.sum(timed(batch, batches, args.rounds))) * 1000 / len(queries)
        print(f"{name:18}{single['p50_ms']:>9.2f}{single['p95_ms']:>9.2f}{per_query:>26.3f}")
    ids = np.asarray([h.docnos for h in index.search_dense(vectors, k=10)])
    _, rows = exact.search(vectors, 10)
    state = index._current()  # the same shard order and tombstones as index_vectors
    docnos = np.concatenate([shard.docnos[live] for shard, live in zip(state.shards, state.live)])
    print(f"sharded dense top-10 equal to one flat index's: {float(np.mean(ids == docnos[rows])):.4f} of the ranks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("sample", "scifact", "wordnet"), default="sample")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dense-type", default="flat")
    parser.add_argument("--index", type=Path, help="search this ingested index as it is (see above)")
    parser.add_argument("--batch", type=int, default=100, help="queries per call in the batch timing (--index)")
    args = checked_args(parser)
    if args.index is not None:
        return ingested(args)
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
    run(main)
