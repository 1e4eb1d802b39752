"""BM25 query throughput: the retrieve.bm25 operator vs bm25s called directly.

Goal: queries/s through the operator >= 0.9 x bm25s's on the same corpus and settings.

Builds a BM25-only Tessera index (``IndexSettings(dense=False)``, under the cache
directory, outside the repository) from a BEIR corpus, and a plain ``bm25s.BM25``
index of the same texts with the same settings as the index (title + " " + text,
English stopwords, English Snowball stemmer, method, k1, b). Then, interleaved
``--repeat`` times in one process and on the same query batches, it times:

- bm25s: ``bm25s.tokenize`` + ``BM25.retrieve`` (top k, one thread) + docno lookup;
- operator: ``create("retrieve.bm25", {"index": path, "k": k})(table)`` on an Arrow
  table ``qid, query`` (tokenisation, search, doc-store rows, ranking columns).

Each side is timed up to its own answer (bm25s's arrays, the operator's table); reading
both back as docno lists for the agreement check happens outside the timing.

It prints queries/s of each (best of the repeats), their ratio, and how often the
top-k docnos agree. Queries: the corpus's sibling ``queries.jsonl`` if there is one
(SciFact), else ``--queries`` texts drawn from the corpus itself (WordNet).

    .venv/bin/python benchmarks/bm25_throughput.py                       # WordNet, 117,659 glosses
    .venv/bin/python benchmarks/bm25_throughput.py --corpus ../shared/data/scifact/corpus.jsonl
    .venv/bin/python benchmarks/bm25_throughput.py --batch 1 --queries 300 --repeat 7  # one query a call, best of 7
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import CACHE, WORDNET, checked_args, read_beir_corpus, run  # noqa: E402


def load_queries(corpus: Path, texts: list[str], n: int, seed: int) -> list[str]:
    path = corpus.parent / "queries.jsonl"
    if path.is_file():
        with open(path, encoding="utf-8") as f:
            queries = [json.loads(line)["text"] for line in f if line.strip()]
        return queries[:n]
    rows = np.random.default_rng(seed).choice(len(texts), size=min(n, len(texts)), replace=False)
    return [texts[i] for i in rows]


def build_tessera_index(path: Path, ids: list[str], titles: list[str], texts: list[str], shards: int, settings):
    """A BM25-only index at ``path`` with ``shards`` shards (rebuilt when its manifest is absent)."""
    from operators.store import Index

    if (path / "manifest.json").is_file():
        return Index.open(path), 0.0
    shutil.rmtree(path, ignore_errors=True)
    start = time.perf_counter()
    index = Index.create(path, settings)
    bounds = np.linspace(0, len(ids), shards + 1).astype(int)
    infos = []
    for s, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        table = pa.table({"docno": ids[lo:hi], "doc_id": ids[lo:hi], "title": titles[lo:hi], "text": texts[lo:hi]})
        infos.append(index.write_shard(f"s{s:04d}", table))
    index.commit(infos)
    return index, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--corpus", type=Path, default=WORDNET, help="BEIR corpus.jsonl (default: WordNet glosses)")
    parser.add_argument("--limit", type=int, default=None, help="index only the first N documents")
    parser.add_argument("--queries", type=int, default=1000, help="queries (at most)")
    parser.add_argument("--batch", type=int, default=100, help="queries per call (both sides)")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--shards", type=int, default=1, help="shards of the Tessera index")
    parser.add_argument("--repeat", type=int, default=5, help="interleaved timing passes (best is reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached Tessera index")
    args = checked_args(parser)
    if not args.corpus.is_file():
        raise SystemExit(f"corpus not found: {args.corpus}")

    import Stemmer

    from operators.bm25s_import import load_bm25s

    bm25s = load_bm25s()

    from operators.registry import create
    from operators.store import IndexSettings

    ids, titles, texts = read_beir_corpus(args.corpus, args.limit)
    queries = load_queries(args.corpus, texts, args.queries, args.seed)
    settings = IndexSettings(dense=False)
    stat = args.corpus.stat()
    key = hashlib.sha256(f"{args.corpus.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{args.limit}|{args.shards}|"
                         f"{settings.model_dump_json()}".encode()).hexdigest()[:12]
    path = CACHE / f"bm25_{args.corpus.parent.name}_{key}"
    if args.rebuild:
        shutil.rmtree(path, ignore_errors=True)
    _, tessera_build = build_tessera_index(path, ids, titles, texts, args.shards, settings)

    # Plain bm25s with the index's settings, on the text the index's BM25 sees (the text_fields joined by a space).
    stemmer = Stemmer.Stemmer(settings.stemmer) if settings.stemmer else None
    start = time.perf_counter()
    indexed = [f"{t or ''} {x or ''}" for t, x in zip(titles, texts)]
    retriever = bm25s.BM25(method=settings.method, k1=settings.k1, b=settings.b, delta=settings.delta)
    retriever.index(bm25s.tokenize(indexed, stopwords=settings.stopwords, stemmer=stemmer, show_progress=False),
                    show_progress=False)
    bm25s_build = time.perf_counter() - start
    docnos = np.array(ids, dtype=object)

    op = create("retrieve.bm25", {"index": str(path), "k": args.k})
    batches = [queries[i: i + args.batch] for i in range(0, len(queries), args.batch)]
    tables = [pa.table({"qid": [f"q{i + j}" for j in range(len(b))], "query": b})
              for i, b in zip(range(0, len(queries), args.batch), batches)]

    # Timed: what each side answers with. bm25s: top-k docnos and scores per query (its arrays,
    # positive scores only); the operator: its result table. Both are read back as docno lists
    # for the agreement check below, outside the timing.
    def direct() -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for batch in batches:
            tokens = bm25s.tokenize(batch, stopwords=settings.stopwords, stemmer=stemmer, show_progress=False)
            found, scores = retriever.retrieve(tokens, k=args.k, show_progress=False, n_threads=0)
            out.extend((docnos[f[s > 0]], s[s > 0]) for f, s in zip(found, scores))
        return out

    def operator() -> list[pa.Table]:
        return [op(table) for table in tables]

    def as_lists(name: str, answers) -> list[tuple[list[str], np.ndarray]]:
        if name == "bm25s":
            return [(d.tolist(), s) for d, s in answers]
        out = []
        for table, result in zip(tables, answers):
            groups: dict[str, tuple[list[str], list[float]]] = {}
            for qid, docno, score in zip(result.column("qid").to_pylist(), result.column("docno").to_pylist(),
                                         result.column("score").to_pylist()):
                hit = groups.setdefault(qid, ([], []))
                hit[0].append(docno)
                hit[1].append(score)
            out.extend((d, np.array(s)) for d, s in (groups.get(q, ([], [])) for q in table.column("qid").to_pylist()))
        return out

    runs = {"bm25s": direct, "operator": operator}
    results = {name: fn() for name, fn in runs.items()}  # warm-up: the operator loads its index here
    seconds_of: dict[str, list[float]] = {name: [] for name in runs}
    for r in range(args.repeat):
        for name, fn in (runs.items() if r % 2 == 0 else reversed(runs.items())):  # interleaved, alternating order
            start = time.perf_counter()
            results[name] = fn()
            seconds = time.perf_counter() - start
            seconds_of[name].append(seconds)
            print(f"pass {r + 1} {name:8s} {len(queries)} queries in {seconds:6.3f} s = "
                  f"{len(queries) / seconds:8.1f} q/s", flush=True)

    pairs = list(zip(as_lists("bm25s", results["bm25s"]), as_lists("operator", results["operator"])))
    same_list = np.mean([a[0] == b[0] for a, b in pairs])
    same_set = np.mean([set(a[0]) == set(b[0]) for a, b in pairs])
    score_diff = max((float(np.max(np.abs(np.sort(a[1]) - np.sort(b[1])))) if len(a[1]) == len(b[1]) and len(a[1])
                      else (0.0 if len(a[1]) == len(b[1]) else float("inf"))) for a, b in pairs)
    qps = {name: len(queries) / min(seconds_of[name]) for name in runs}
    ratio = qps["operator"] / qps["bm25s"]
    median_ratio = float(np.median(seconds_of["bm25s"]) / np.median(seconds_of["operator"]))
    print(f"\n{args.corpus.parent.name}: {len(ids):,} docs, {len(queries)} queries in batches of {args.batch}, "
          f"k={args.k}, {args.shards} shard(s); build: Tessera {tessera_build:.1f} s (0 = cached), "
          f"bm25s {bm25s_build:.1f} s")
    print(f"best of {args.repeat}: bm25s {qps['bm25s']:.1f} q/s, operator {qps['operator']:.1f} q/s, "
          f"operator/bm25s = {ratio:.3f} (goal >= 0.9: {'met' if ratio >= 0.9 else 'MISSED'}); "
          f"ratio of the medians {median_ratio:.3f}")
    print(f"top-{args.k} docnos identical (order too) for {same_list:.1%} of queries, same set for {same_set:.1%}; "
          f"largest score difference {score_diff:.2e} (order differs only among tied scores when it is 0)")


if __name__ == "__main__":
    run(main)
