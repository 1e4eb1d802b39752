"""ColBERT reranking of BM25 candidates on SciFact: precomputed document tokens vs encoding on the fly.

For ``--queries`` SciFact test queries, BM25 (over the whole corpus) gives ``--candidates``
documents each; an index of those candidates gets its precomputed tokens
(``build_token_store``), then ``rerank.colbert`` reranks every query once with the store
and once without, one query per call (an online request). Prints per-query times and the
ratio, and checks that both rankings agree.

    python benchmarks/colbert_precomputed.py [--model tessera-colbert] [--queries 20] [--candidates 100]

Without a trained model (``--model`` not found) a throwaway one is trained for a few
steps first: timing does not depend on the weights.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _throwaway_model(data: Path, folder: Path) -> str:
    from flows.train.colbert import train_colbert

    corpus = {d["_id"]: d for d in _read_jsonl(data / "corpus.jsonl")}
    queries = {q["_id"]: q["text"] for q in _read_jsonl(data / "queries.jsonl")}
    train = (data / "qrels" / "train.tsv").read_text(encoding="utf-8")
    rows = [line.split("\t")[:2] for line in train.splitlines()[1:]]
    rng, ids = random.Random(0), sorted(corpus)

    def text(doc):
        return f"{doc['title']}\n{doc['text']}"

    examples = [{"query": queries[q], "positive": text(corpus[d]),
                 "negatives": [text(corpus[n]) for n in rng.sample(ids, 3)]} for q, d in rows[:32] if d in corpus]
    return str(train_colbert(examples, output_dir=folder / "colbert", max_steps=4, batch_size=8, progress=False))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "scifact"), help="SciFact folder")
    parser.add_argument("--model", default="tessera-colbert", help="ColBERT reference (default: tessera-colbert)")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    args = parser.parse_args()

    import torch

    from operators.models import ModelNotFoundError, resolve_model_path
    from operators.rerank.colbert import ColbertReranker
    from operators.retrieve.bm25 import BM25Retriever
    from operators.store import Index
    from operators.store.token_store import build_token_store

    if args.threads:
        torch.set_num_threads(args.threads)
    data = Path(args.data)
    work = Path(tempfile.mkdtemp(prefix="colbert-bench-"))
    try:
        model = str(resolve_model_path(args.model))
    except ModelNotFoundError:
        print(f"model {args.model!r} not found: training a throwaway one (4 steps)", file=sys.stderr)
        model = _throwaway_model(data, work)

    corpus = _read_jsonl(data / "corpus.jsonl")
    full = Index.create(work / "full", {"dense": False})
    full.add(pa.table({"docno": [d["_id"] for d in corpus], "doc_id": [d["_id"] for d in corpus],
                       "title": [d["title"] for d in corpus], "text": [d["text"] for d in corpus]}))
    test = (data / "qrels" / "test.tsv").read_text(encoding="utf-8")
    test_qids = [line.split("\t")[0] for line in test.splitlines()[1:]]
    texts = {q["_id"]: q["text"] for q in _read_jsonl(data / "queries.jsonl")}
    qids = list(dict.fromkeys(test_qids))[:args.queries]
    queries = pa.table({"qid": qids, "query": [texts[q] for q in qids]})
    candidates = BM25Retriever({"index": str(full.path), "k": args.candidates})(queries)

    # An index of the candidates only: its store is what a full ingestion with --colbert would hold for them.
    docnos = sorted(set(candidates.column("docno").to_pylist()))
    small = Index.create(work / "candidates", {"dense": False})
    small.add(full.documents(docnos).select(["docno", "doc_id", "title", "text"]))
    started = time.perf_counter()
    store = build_token_store(small, model, progress=True)
    build_s = time.perf_counter() - started
    print(f"token store: {len(store)} docs, {len(store.tokens)} tokens, {build_s:.1f} s to build "
          f"({len(store) / build_s:.1f} docs/s)")

    common = {"model": model, "n": args.candidates, "device": "cpu"}
    precomputed = ColbertReranker({**common, "index": str(small.path)}, step_id="cb")
    on_the_fly = ColbertReranker({**common, "token_store": None}, step_id="cb")
    tables = [candidates.filter(pc.equal(candidates.column("qid"), q)) for q in qids]
    for op in (precomputed, on_the_fly):  # load the model, warm up
        op(tables[0].slice(0, 5))
        op.counts = {"stored": 0, "encoded": 0}
    times: dict[str, list[float]] = {"precomputed": [], "on_the_fly": []}
    agree = 0
    for table in tables:
        outs = {}
        for name, op in (("precomputed", precomputed), ("on_the_fly", on_the_fly)):
            started = time.perf_counter()
            outs[name] = op(table)
            times[name].append(time.perf_counter() - started)
        agree += outs["precomputed"].column("docno").to_pylist()[:10] == \
            outs["on_the_fly"].column("docno").to_pylist()[:10]
    fast, slow = np.mean(times["precomputed"]), np.mean(times["on_the_fly"])
    print(f"{len(tables)} queries x {args.candidates} candidates, torch threads {torch.get_num_threads()}")
    print(f"precomputed: {fast * 1000:.0f} ms/query; on the fly: {slow * 1000:.0f} ms/query "
          f"(stored {precomputed.counts['stored']}, encoded {on_the_fly.counts['encoded']})")
    print(f"same top 10: {agree}/{len(tables)} queries")
    print(f"ratio on-the-fly / precomputed: {slow / fast:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
