"""Derive the SciFact subset of the quality test (``scifact_subset.json``) from full-corpus runs.

    python tests/quality/derive_scifact_subset.py --bench-out DIR [--index-dir DIR] [--depth N]

The subset keeps **every** judged test query (300) and a pooled corpus: for each query, its judged documents
plus the top ``--depth`` documents of each of the ``bm25``, ``dense`` and ``hybrid`` runs of ``tessera bench``
over the *full* SciFact corpus (the pipeline the test measures). That is TREC-style pooling: every
subset query keeps the documents that the real pipeline found hardest to tell apart from its relevant ones,
so the subset stays a ranking task with hard distractors, not a pick of the relevant document among
random ones. The dense ranking of a query is corpus-independent (a cosine per document), so its top
``--depth`` on the subset is exactly its full-corpus top ``--depth``; BM25 statistics (IDF, average
length) and therefore BM25 and hybrid rankings shift a little with the corpus, and the test's thresholds are
the real pipeline's figures *on this subset* (measured, not predicted), stated beside the full-corpus ones.

Deterministic: the runs are deterministic (bm25s, a flat FAISS index, MiniLM on CPU), pools are sets,
and the ids are written in file order (queries as ``queries.jsonl``, documents as ``corpus.jsonl``).
Only ids are committed, never the data; the json records the sha256 of the three source files (from
``../shared/data/MANIFEST.json``) so the test fails, asking for a re-derivation, if the data changes.

If ``DIR/bench.json`` does not exist, the full benchmark is run first (``tessera bench --dataset scifact
--flow bm25 --flow dense --flow hybrid --k 10,100``): about 8 minutes on 2 cores, most of it embedding
the 5,183 abstracts. ``make test-quality`` runs the full-corpus check itself.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCIFACT = REPO.parent / "shared" / "data" / "scifact"
OUTPUT = HERE / "scifact_subset.json"
FLOWS = ("bm25", "dense", "hybrid")
SOURCE_FILES = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv")


def full_runs(bench_out: Path, index_dir: Path | None) -> dict[str, dict[str, list[str]]]:
    """{flow: {qid: [docno by rank]}} from a full-corpus ``tessera bench`` (run first when missing)."""
    import pyarrow.parquet as pq

    if not (bench_out / "bench.json").is_file():
        sys.path.insert(0, str(REPO))
        from flows.commands import main

        args = ["bench", "--dataset", str(SCIFACT), "--out", str(bench_out), "--k", "10,100", "--no-mlflow"]
        if index_dir:
            args += ["--index-dir", str(index_dir)]
        for flow in FLOWS:
            args += ["--flow", flow]
        if main(args) != 0:
            raise SystemExit("the full-corpus benchmark failed")
    info = json.loads((bench_out / "bench.json").read_text(encoding="utf-8"))["flows"]
    runs: dict[str, dict[str, list[str]]] = {}
    for flow in FLOWS:
        table = pq.read_table(info[flow]["run_file"]).sort_by([("qid", "ascending"), ("rank", "ascending")])
        ranked: dict[str, list[str]] = {}
        for qid, docno in zip(table.column("qid").to_pylist(), table.column("docno").to_pylist()):
            ranked.setdefault(qid, []).append(docno)
        runs[flow] = ranked
    return runs


def derive(runs: dict[str, dict[str, list[str]]], depth: int) -> dict:
    manifest = json.loads((SCIFACT.parent / "MANIFEST.json").read_text(encoding="utf-8"))["scifact"]["files"]
    qrels = [line.split("\t") for line in (SCIFACT / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]
             if line.strip()]
    judged: dict[str, set[str]] = {}
    for qid, docno, _ in qrels:
        judged.setdefault(qid, set()).add(docno)
    lines = (SCIFACT / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    query_order = [json.loads(line)["_id"] for line in lines]
    queries = [q for q in query_order if q in judged]
    pool: set[str] = set()
    for qid in queries:
        pool |= judged[qid]
        for flow in FLOWS:
            pool.update(runs[flow].get(qid, [])[:depth])
    with open(SCIFACT / "corpus.jsonl", encoding="utf-8") as f:
        documents = [doc_id for doc_id in (json.loads(line)["_id"] for line in f) if doc_id in pool]
    missing = pool - set(documents)
    if missing:
        raise SystemExit(f"{len(missing)} pooled ids are not in the corpus, e.g. {sorted(missing)[:3]}")
    # The full-corpus dense ranking restricted to the subset: a cosine per document does not depend on the
    # other documents, so the subset's dense run must give exactly this order (first 10, or fewer when fewer
    # subset documents are in the full run's top 100).
    kept = set(documents)
    reference = {qid: [d for d in runs["dense"].get(qid, []) if d in kept][:10] for qid in queries}
    return {
        "dataset": "scifact", "split": "test",
        "source_sha256": {name: manifest[name]["sha256"] for name in SOURCE_FILES},
        "derivation": (f"every judged test query; documents: each query's judged documents plus the top {depth} "
                       f"of each of the {', '.join(FLOWS)} runs of `tessera bench --k 10,100` over the full "
                       "corpus, in corpus.jsonl order (tests/quality/derive_scifact_subset.py)"),
        "pool_depth": depth, "flows": list(FLOWS),
        "queries": queries, "documents": documents, "dense_top10": reference,
    }


def to_json(subset: dict) -> str:
    """One key a line; id lists on one line each (dense_top10: one query a line)."""
    lines = []
    for key, value in subset.items():
        if key == "dense_top10":
            inner = ",\n".join(f"  {json.dumps(q)}: {json.dumps(ids)}" for q, ids in value.items())
            lines.append(f' "{key}": {{\n{inner}\n }}')
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench-out", type=Path, required=True,
                        help="output folder of a full-corpus tessera bench (run there first when it has no bench.json)")
    parser.add_argument("--index-dir", type=Path, help="where the full-corpus indices are built or found")
    parser.add_argument("--depth", type=int, default=2, help="pool depth per run (default 2)")
    parser.add_argument("--out", type=Path, default=OUTPUT, help=f"where to write the ids (default {OUTPUT})")
    args = parser.parse_args()
    subset = derive(full_runs(args.bench_out, args.index_dir), args.depth)
    args.out.write_text(to_json(subset), encoding="utf-8")
    print(f"{len(subset['queries'])} queries, {len(subset['documents'])} documents -> {args.out}")


if __name__ == "__main__":
    main()
