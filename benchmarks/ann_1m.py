"""ANN at 1M x 384: which FAISS index type meets the latency, recall and memory goal.

Goal (per index type): p50 <= 2 ms per query on ONE thread, recall@10 >= 0.95
against exact search, and index memory <= 0.6 GB (a flat float32 index is 1.5 GB).

Data (``--index``): every vector of an ingested Tessera index (the 916K scale corpus's) as the base,
and real questions (benchmarks/_common.py's QUERY_SETS) embedded with its encoder as queries.

Data (default): the WordNet glosses (117,659, ../shared/data) encoded with all-MiniLM-L6-v2
(``title. text``, L2-normalised; cached as .npy under ~/.cache/tessera-bench).
``--queries`` glosses, drawn at random, are held out as queries and are not in the
base; the base is the other real vectors plus noisy copies up to ``--n``: a copy is
``normalise(x + sigma * g / sqrt(384))`` with g ~ N(0, I), so its cosine to its
source is about 1 / sqrt(1 + sigma^2). ``--sigma auto`` (the default) picks sigma so
that this equals the median cosine between a real gloss and its nearest real gloss:
a copy is as close to its source as a real nearest neighbour is. (Isotropic noise
also leaves the data's low-dimensional structure, so this is harder on ANN and on
quantisers than more real documents would be.) Ground truth: exact top-10 by inner
product (IndexFlatIP).

Per index type: build (all threads; the IVF types share one k-means and one list
assignment, which are reported apart), then in a fresh subprocess load the saved
index and record its RSS growth and file size, and sweep the search parameter
(nprobe / efSearch / k_factor) on one thread, keeping the cheapest setting that
reaches the recall target (or the best recall if none does). Last, all indices are
timed side by side in one process: ``--rounds`` interleaved passes, one query per
call on one thread; each query's latency is its fastest pass (the machine is
shared), and p50/p95 are over queries. Results go to a JSON file (``--out``).

    .venv/bin/python benchmarks/ann_1m.py                       # 1M, all types (long)
    .venv/bin/python benchmarks/ann_1m.py --n 200000 --types flat,sq8,hnsw_sq8
    .venv/bin/python benchmarks/ann_1m.py --limit 5000 --n 50000 --nlist 256   # quick dev run
    .venv/bin/python benchmarks/ann_1m.py --index INDEX --types flat,hnsw_sq8,ivfpq   # an ingested index
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# Oversubscribed machine: OpenMP threads that spin at barriers starve each other; let them sleep.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (CACHE, WORDNET, encode_corpus, encode_queries, index_vectors, latency_summary,  # noqa: E402
                     checked_args, real_queries, rss_bytes, run)

K = 10
GB = 1e9

#: kind -> (factory string; {nlist} and the PQ sizes {pq} (dim/8: 48 at 384-d) and {pq4} (dim/4) are filled in,
#: sweep: groups of parameter strings, each group in increasing cost, stopped at the first that reaches the target).
NPROBES = [4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256]
EFS = [16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512]
KINDS: dict[str, tuple[str, list[list[str]]]] = {
    "flat": ("Flat", [[""]]),
    "hnsw": ("HNSW32", [[f"efSearch={e}" for e in EFS]]),
    "ivf": ("IVF{nlist},Flat", [[f"nprobe={p}" for p in NPROBES]]),
    "ivfpq": ("IVF{nlist},PQ{pq},Refine(SQ8)",
              [[f"nprobe={p},k_factor_rf={f}" for p in NPROBES] for f in (2, 4, 8, 16)]),
    "ivfpq_norefine": ("IVF{nlist},PQ{pq4}", [[f"nprobe={p}" for p in NPROBES]]),
    "sq8": ("IVF{nlist},SQ8", [[f"nprobe={p}" for p in NPROBES]]),
    "hnsw_sq8": ("HNSW32_SQ8", [[f"efSearch={e}" for e in EFS]]),
    "hnsw24_sq8": ("HNSW24_SQ8", [[f"efSearch={e}" for e in EFS]]),
    "hnsw16_sq8": ("HNSW16_SQ8", [[f"efSearch={e}" for e in EFS]]),
    "ivf_hnsw_sq8": ("IVF{nlist}_HNSW32,SQ8",
                     [[f"nprobe={p},quantizer_efSearch={max(64, 2 * p)}" for p in NPROBES]]),
}
DEFAULT_TYPES = "flat,hnsw,ivf,ivfpq,sq8,hnsw_sq8,hnsw24_sq8"


# -- data -----------------------------------------------------------------------

def nn1_median_cosine(real: np.ndarray, sample: int, rng: np.random.Generator) -> float:
    import faiss

    index = faiss.IndexFlatIP(real.shape[1])
    index.add(real)
    rows = rng.choice(len(real), size=min(sample, len(real)), replace=False)
    scores, _ = index.search(real[rows], 2)
    return float(np.median(scores[:, 1]))  # column 0 is the vector itself


def index_data(args: argparse.Namespace) -> tuple[Path, dict]:
    """``--index``: the base is every vector of a Tessera index, the queries real questions embedded
    with its encoder, the truth their exact top-K; cached under CACHE per index generation."""
    import faiss

    from operators.store import Index

    generation = Index.open(args.index).generation
    key = hashlib.sha256(f"{args.index.resolve()}|{generation}|{args.queries}|{args.seed}".encode()).hexdigest()[:12]
    folder = CACHE / f"ann_index_{key}"
    if (folder / "data.json").is_file():
        return folder, json.loads((folder / "data.json").read_text(encoding="utf-8"))
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    base = index_vectors(args.index)
    queries = encode_queries(args.index, real_queries(args.queries, args.seed))
    flat = faiss.IndexFlatIP(base.shape[1])
    flat.add(base)
    _, truth = flat.search(queries, K)
    np.save(folder / "base.npy", base)
    np.save(folder / "queries.npy", queries)
    np.save(folder / "truth.npy", truth)
    meta = {"n": len(base), "dim": base.shape[1], "real_base": len(base), "queries": len(queries), "sigma": 0.0,
            "index": str(args.index), "median_nn1_cosine_real": None, "mean_copy_to_source_cosine": None,
            "prepare_s": round(time.perf_counter() - start, 1)}
    (folder / "data.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return folder, meta


def prepare_data(args: argparse.Namespace) -> tuple[Path, dict]:
    """Queries, base (memmapped .npy) and exact top-K under CACHE, built once per setting."""
    import faiss

    if args.index is not None:
        return index_data(args)
    vectors = encode_corpus(WORDNET, limit=args.limit)
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(vectors))
    queries, real = vectors[order[: args.queries]], vectors[order[args.queries:]]
    sigma = args.sigma
    nn1 = None
    if sigma == "auto":
        nn1 = nn1_median_cosine(real, 2000, rng)
        sigma = math.sqrt(1.0 / nn1 ** 2 - 1.0)
    sigma = float(sigma)
    n = max(args.n, len(real))
    identity = f"{len(vectors)}|{args.limit}|{args.queries}|{n}|{sigma:.4f}|{args.seed}"
    key = hashlib.sha256(identity.encode()).hexdigest()[:12]
    folder = CACHE / f"ann_n{n}_{key}"
    meta_path = folder / "data.json"
    if meta_path.is_file():
        return folder, json.loads(meta_path.read_text(encoding="utf-8"))
    folder.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    dim = vectors.shape[1]
    base = np.lib.format.open_memmap(folder / "base.tmp.npy", mode="w+", dtype=np.float32, shape=(n, dim))
    base[: len(real)] = real
    sources = np.resize(rng.permutation(len(real)), n - len(real))  # each real vector copied ~equally often
    for lo in range(0, len(sources), 100_000):
        src = real[sources[lo: lo + 100_000]]
        noisy = src + (sigma / math.sqrt(dim)) * rng.standard_normal(src.shape, dtype=np.float32)
        noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
        base[len(real) + lo: len(real) + lo + len(src)] = noisy
    base.flush()
    copy_cos = float(np.mean(np.sum(base[len(real): len(real) + 10_000] * real[sources[:10_000]], axis=1))) \
        if n > len(real) else None
    flat = faiss.IndexFlatIP(dim)
    flat.add(np.asarray(base))
    _, truth = flat.search(queries, K)
    del flat, base
    os.rename(folder / "base.tmp.npy", folder / "base.npy")
    np.save(folder / "queries.npy", queries)
    np.save(folder / "truth.npy", truth)
    meta = {"n": n, "dim": dim, "real_base": len(real), "queries": len(queries), "sigma": sigma,
            "median_nn1_cosine_real": nn1, "mean_copy_to_source_cosine": copy_cos,
            "prepare_s": round(time.perf_counter() - start, 1)}
    meta_path.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    return folder, meta


# -- building -------------------------------------------------------------------

def train_sample(base: np.ndarray, size: int, seed: int) -> np.ndarray:
    rows = np.sort(np.random.default_rng(seed).choice(len(base), size=min(size, len(base)), replace=False))
    return np.ascontiguousarray(base[rows])


def shared_ivf(folder: Path, base: np.ndarray, nlist: int, train: int,
               seed: int) -> tuple[np.ndarray, np.ndarray, dict]:
    """Centroids (spherical k-means) and every base vector's nearest centroid, cached."""
    import faiss

    path = folder / f"ivf{nlist}_t{train}.npz"
    if path.is_file():
        saved = np.load(path)
        return saved["centroids"], saved["assign"], json.loads(str(saved["info"]))
    start = time.perf_counter()
    kmeans = faiss.Kmeans(base.shape[1], nlist, niter=20, spherical=True, seed=seed, verbose=False)
    kmeans.train(train_sample(base, train, seed))
    trained = time.perf_counter()
    quantizer = faiss.IndexFlatIP(base.shape[1])
    quantizer.add(kmeans.centroids)
    assign = np.empty(len(base), dtype=np.int64)
    for lo in range(0, len(base), 100_000):
        assign[lo: lo + 100_000] = quantizer.search(np.ascontiguousarray(base[lo: lo + 100_000]), 1)[1][:, 0]
    info = {"kmeans_s": round(trained - start, 1), "assign_s": round(time.perf_counter() - trained, 1)}
    np.savez(path, centroids=kmeans.centroids, assign=assign, info=json.dumps(info))
    return kmeans.centroids, assign, info


def build(kind: str, factory: str, folder: Path, base: np.ndarray, args: argparse.Namespace) -> dict:
    """Build (or reuse) the index file for ``kind``; returns its build info."""
    import faiss

    factory_name = factory.replace(',', '_').replace('(', '_').replace(')', '')
    path = folder / f"{kind}_{factory_name}_efc{args.ef_construction}.faiss"
    info_path = path.with_suffix(".json")
    if path.is_file() and info_path.is_file() and not args.rebuild:
        return json.loads(info_path.read_text(encoding="utf-8"))
    faiss.omp_set_num_threads(os.cpu_count() or 1)
    index = faiss.index_factory(base.shape[1], factory, faiss.METRIC_INNER_PRODUCT)
    info: dict = {"factory": factory}
    start = time.perf_counter()
    ivf = faiss.try_extract_index_ivf(index)
    for graph in (index, ivf.quantizer if ivf is not None else None):
        if graph is not None and hasattr(faiss.downcast_index(graph), "hnsw"):
            faiss.downcast_index(graph).hnsw.efConstruction = args.ef_construction
    if ivf is not None:  # reuse the shared k-means and assignment: the IVF types differ only in codes
        centroids, assign, info["shared"] = shared_ivf(folder, base, args.nlist, args.train, args.seed)
        ivf.quantizer.add(centroids)  # a trained quantizer holding nlist vectors is not retrained
        start = time.perf_counter()
    if not index.is_trained:  # PQ codebooks train slowly (k-means per sub-vector): a smaller sample
        index.train(train_sample(base, args.pq_train if "PQ" in factory else args.train, args.seed))
    info["train_s"] = round(time.perf_counter() - start, 1)
    start = time.perf_counter()
    refine = faiss.downcast_index(index) if factory.endswith(")") and "Refine" in factory else None
    for lo in range(0, len(base), 100_000):
        chunk = np.ascontiguousarray(base[lo: lo + 100_000])
        if ivf is not None:  # add with the precomputed list numbers
            ids = np.ascontiguousarray(assign[lo: lo + len(chunk)])
            ivf.add_core(len(chunk), faiss.swig_ptr(chunk), None, faiss.swig_ptr(ids))
            if refine is not None:
                refine.refine_index.add(chunk)
                refine.ntotal = refine.refine_index.ntotal
        else:
            index.add(chunk)
    assert index.ntotal == len(base), (kind, index.ntotal, len(base))
    info["add_s"] = round(time.perf_counter() - start, 1)
    info["build_s"] = round(info["train_s"] + info["add_s"]
                            + sum(info.get("shared", {}).values()), 1)  # with the shared k-means counted
    faiss.write_index(index, str(path))
    info["path"] = str(path)
    info["file_bytes"] = path.stat().st_size
    info_path.write_text(json.dumps(info, indent=1), encoding="utf-8")
    return info


# -- measuring ------------------------------------------------------------------

def recall_at_k(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f[f >= 0]) & set(t)) / K for f, t in zip(found, truth)]))


def measure_one(kind: str, path: str, folder: Path, target: float, flat_queries: int) -> dict:
    """In a fresh process: RSS growth of loading the index, then the recall sweep on one thread."""
    import faiss

    queries, truth = np.load(folder / "queries.npy"), np.load(folder / "truth.npy")
    if kind == "flat":  # exact by construction; a few queries confirm it
        queries, truth = queries[:flat_queries], truth[:flat_queries]
    faiss.omp_set_num_threads(1)
    before = rss_bytes()
    index = faiss.read_index(path)
    grown = rss_bytes() - before
    space = faiss.ParameterSpace()
    sweep, chosen, best = [], None, None
    for group in KINDS[kind][1]:
        for params in group:
            if params:
                space.set_index_parameters(index, params)
            start = time.perf_counter()
            _, found = index.search(queries, K)  # batched, one thread: ~ the per-query cost
            ms = (time.perf_counter() - start) * 1000 / len(queries)
            row = {"params": params, "recall": recall_at_k(found, truth), "batch_ms_per_query": round(ms, 3)}
            sweep.append(row)
            if best is None or row["recall"] > best["recall"]:
                best = row
            if row["recall"] >= target:
                if chosen is None or ms < chosen["batch_ms_per_query"]:
                    chosen = row
                break
    return {"rss_growth_bytes": grown, "sweep": sweep, "chosen": chosen or best, "meets_recall": chosen is not None}


def side_by_side(rows: dict[str, dict], folder: Path, rounds: int, lat_queries: int, flat_queries: int) -> None:
    """All indices in one process, one thread, one query per call, interleaved passes."""
    import faiss

    faiss.omp_set_num_threads(1)
    queries, truth = np.load(folder / "queries.npy"), np.load(folder / "truth.npy")
    space = faiss.ParameterSpace()
    indices = {}
    for kind, row in rows.items():
        indices[kind] = faiss.read_index(row["path"])
        if row["chosen"]["params"]:
            space.set_index_parameters(indices[kind], row["chosen"]["params"])
    counts = {kind: min(flat_queries if kind == "flat" else lat_queries, len(queries)) for kind in rows}
    times = {kind: np.full((rounds, counts[kind]), np.inf) for kind in rows}
    found = {kind: np.zeros((counts[kind], K), dtype=np.int64) for kind in rows}
    for r in range(rounds):
        for kind, index in indices.items():
            for i in range(counts[kind]):
                q = queries[i: i + 1]
                start = time.perf_counter()
                _, ids = index.search(q, K)
                times[kind][r, i] = time.perf_counter() - start
                found[kind][i] = ids[0]
    for kind, row in rows.items():
        row["latency"] = latency_summary(times[kind].min(axis=0))
        row["latency_all_samples"] = latency_summary(times[kind].reshape(-1))
        row["latency_queries"] = counts[kind]
        row["recall_single"] = recall_at_k(found[kind], truth[: counts[kind]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000, help="base vectors (real + noisy copies)")
    parser.add_argument("--queries", type=int, default=1000, help="held-out glosses used as queries")
    parser.add_argument("--limit", type=int, default=None, help="encode only the first N glosses (dev runs)")
    parser.add_argument("--sigma", default="auto", help="noise norm of a copy, or 'auto' (see above)")
    parser.add_argument("--types", default=DEFAULT_TYPES, help=f"comma list of {', '.join(KINDS)}")
    parser.add_argument("--nlist", type=int, default=4096, help="IVF lists")
    parser.add_argument("--train", type=int, default=160_000, help="training sample (k-means, PQ, SQ)")
    parser.add_argument("--pq-train", type=int, default=20_000, help="training sample of the PQ types")
    parser.add_argument("--ef-construction", type=int, default=40, help="HNSW efConstruction")
    parser.add_argument("--target-recall", type=float, default=0.95)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing passes (fastest per query kept)")
    parser.add_argument("--latency-queries", type=int, default=1000, help="queries timed per index")
    parser.add_argument("--flat-queries", type=int, default=100, help="queries timed for the (slow) flat index")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--index", type=Path, default=None, help="a Tessera index: its vectors are the base, real "
                        "questions embedded with its encoder the queries (the 916K scale index, issue 33)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild cached index files")
    parser.add_argument("--out", type=Path, default=None, help="results JSON (default: under the cache)")
    parser.add_argument("--measure-one", nargs=3, metavar=("KIND", "INDEX", "DATA"), help=argparse.SUPPRESS)
    args = checked_args(parser)

    if args.measure_one:  # child process: print one JSON line
        kind, path, folder = args.measure_one
        print(json.dumps(measure_one(kind, path, Path(folder), args.target_recall, args.flat_queries)))
        return
    kinds = [k.strip() for k in args.types.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown index types {unknown}; known: {', '.join(KINDS)}")

    folder, meta = prepare_data(args)
    print(f"data: {meta['n']:,} x {meta['dim']} ({meta['real_base']:,} real + noisy copies, sigma={meta['sigma']:.3f}, "
          f"copy-source cosine {meta['mean_copy_to_source_cosine'] or float('nan'):.3f}, "
          f"real 1-NN median cosine {meta['median_nn1_cosine_real'] or float('nan'):.3f}); "
          f"{meta['queries']} held-out queries; cache {folder}", flush=True)
    base = np.load(folder / "base.npy", mmap_mode="r")
    rows: dict[str, dict] = {}
    for kind in kinds:
        factory = KINDS[kind][0].format(nlist=args.nlist, pq=meta["dim"] // 8, pq4=meta["dim"] // 4)
        start = time.perf_counter()
        rows[kind] = build(kind, factory, folder, base, args)
        print(f"built {kind:14s} {factory:28s} build {rows[kind]['build_s']:7.1f} s "
              f"(this run {time.perf_counter() - start:.0f} s), file {rows[kind]['file_bytes'] / GB:.3f} GB",
              flush=True)
    del base
    for kind in kinds:
        out = subprocess.run([sys.executable, __file__, "--measure-one", kind, rows[kind]["path"], str(folder),
                              "--target-recall", str(args.target_recall), "--flat-queries", str(args.flat_queries)],
                             check=True, capture_output=True, text=True).stdout
        rows[kind].update(json.loads(out.strip().splitlines()[-1]))
        chosen = rows[kind]["chosen"]
        print(f"swept {kind:14s} -> {chosen['params'] or '-':40s} recall {chosen['recall']:.3f} "
              f"(batch {chosen['batch_ms_per_query']:.2f} ms/q), RSS +{rows[kind]['rss_growth_bytes'] / GB:.3f} GB",
              flush=True)
    side_by_side(rows, folder, args.rounds, args.latency_queries, args.flat_queries)

    print(f"\n{meta['n']:,} x {meta['dim']}, one thread, one query per call, fastest of {args.rounds} interleaved "
          f"passes; goal p50 <= 2 ms, recall@10 >= {args.target_recall}, memory <= 0.6 GB")
    header = f"{'type':14s} {'factory':28s} {'params':36s} {'p50 ms':>7s} {'p95 ms':>7s} {'recall':>6s} " \
             f"{'file GB':>7s} {'RSS GB':>6s} {'build s':>7s}  goal"
    print(header + "\n" + "-" * len(header))
    for kind, row in rows.items():
        memory = max(row["file_bytes"], row["rss_growth_bytes"])
        row["meets_goal"] = bool(row["latency"]["p50_ms"] <= 2.0 and row["chosen"]["recall"] >= args.target_recall
                                 and memory <= 0.6 * GB)
        print(f"{kind:14s} {row['factory']:28s} {row['chosen']['params'] or '-':36s} {row['latency']['p50_ms']:7.2f} "
              f"{row['latency']['p95_ms']:7.2f} {row['chosen']['recall']:6.3f} {row['file_bytes'] / GB:7.3f} "
              f"{row['rss_growth_bytes'] / GB:6.3f} {row['build_s']:7.0f}  {'yes' if row['meets_goal'] else 'no'}")
    out_path = args.out or folder / f"results_{time.strftime('%Y%m%d-%H%M%S')}.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps({"data": meta, "args": {k: str(v) for k, v in vars(args).items()},
                                    "cpu_count": os.cpu_count(), "results": rows}, indent=1), encoding="utf-8")
    print(f"\nresults: {out_path}")


if __name__ == "__main__":
    run(main)
