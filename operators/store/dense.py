"""One FAISS index per shard: built with ``index_factory`` (inner product), ids are row
positions in the shard's docs.parquet, and deletions or pre-filters are an
``IDSelectorBitmap`` passed in ``SearchParameters`` (every type here honours it in
faiss 1.15). A shard too small to train its type is built flat, and says so.

Defaults come from ``benchmarks/ann_1m.py`` (1M x 384 MiniLM vectors; its figures are in
docs/results.md, "ANN index types at 1M vectors"): ``hnsw_sq8`` uses M=24 (the knee of
latency against memory; efSearch 96 buys recall), ``ivfpq`` re-ranks its PQ candidates
with SQ8 codes (PQ alone loses most of the recall), and ``sq8`` is IVF + 8-bit scalar
quantisation (small and exact enough, but slower). IVF types train k-means on a sample of
at most 50 vectors per list: training on every vector costs minutes and gains nothing.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from operators.store.settings import DenseInfo, IndexSettings

DENSE_FILE, VECTORS_FILE = "dense.faiss", "vectors.npy"


def _ivf_nlist(n: int, options: dict[str, int]) -> int:
    # About 4*sqrt(n) lists, with at least 39 training points per list (FAISS's own advice).
    return options.get("nlist") or max(1, min(int(4 * math.sqrt(n)), n // 39))


#: Vectors per inverted list that k-means trains on (FAISS warns below 39).
TRAIN_PER_LIST = 50


def default_nprobe(nlist: int) -> int:
    """Lists searched per query: about 1.5 * sqrt(nlist) (recall at 1M in docs/results.md)."""
    return min(nlist, max(16, round(1.5 * math.sqrt(nlist))))


def factory_for(settings: IndexSettings, n: int) -> tuple[str, str | None]:
    """The ``index_factory`` string for a shard of ``n`` vectors, and why it fell back to flat (or None)."""
    opts, kind = settings.dense_options, settings.dense_type
    if kind == "flat":
        return "Flat", None
    if kind == "hnsw":
        return f"HNSW{opts.get('M', 32)},Flat", None
    if kind == "hnsw_sq8":
        return f"HNSW{opts.get('M', 24)},SQ8", None
    nlist = _ivf_nlist(n, opts)
    if kind == "ivf":
        need = nlist
        factory = f"IVF{nlist},Flat"
    elif kind == "sq8":
        need = nlist
        factory = f"IVF{nlist},SQ8"
    else:  # ivfpq
        pq_m = opts.get("pq_m") or next(d for d in (settings.dim // 8, settings.dim // 4, settings.dim // 2, 1)
                                        if d and settings.dim % d == 0)
        if settings.dim % pq_m:
            return "Flat", f"pq_m={pq_m} does not divide dim={settings.dim}"
        nbits = opts.get("pq_nbits", 8)
        need = max(nlist, 2 ** nbits)
        factory = f"IVF{nlist},PQ{pq_m}x{nbits},Refine(SQ8)"
    if n < need:
        return "Flat", f"{n} vectors cannot train {factory} (needs {need})"
    return factory, None


def build(vectors: np.ndarray, settings: IndexSettings):
    """A trained FAISS index holding ``vectors`` at ids 0..n-1, with how it was built."""
    import faiss

    factory, fallback = factory_for(settings, len(vectors))
    index = faiss.index_factory(settings.dim, factory, faiss.METRIC_INNER_PRODUCT)
    if "HNSW" in factory:
        index.hnsw.efConstruction = settings.dense_options.get("efConstruction", 40)
    if "IVF" in factory:
        ivf = faiss.extract_index_ivf(index)
        ivf.cp.min_points_per_centroid = 1  # small shards: train anyway, quietly
        if "PQ" in factory:
            ivfpq = faiss.downcast_index(ivf)
            ivfpq.pq.cp.min_points_per_centroid = 1
            ivfpq.do_polysemous_training = False  # the factory turns it on; minutes of training for no recall
    if not index.is_trained:
        index.train(_training_sample(vectors, factory))
    index.add(vectors)
    return index, DenseInfo(type=settings.dense_type, factory=factory, fallback=fallback)


def _training_sample(vectors: np.ndarray, factory: str) -> np.ndarray:
    """At most TRAIN_PER_LIST vectors per inverted list (PQ codebooks need 256 * 39), drawn reproducibly."""
    if not factory.startswith("IVF"):
        return vectors
    nlist = int(factory[3:].split(",", 1)[0])
    size = max(TRAIN_PER_LIST * nlist, 256 * 39 if "PQ" in factory else 0)
    if len(vectors) <= size:
        return vectors
    rows = np.sort(np.random.default_rng(0).choice(len(vectors), size, replace=False))
    return vectors[rows]


def keeps_exact_vectors(factory: str) -> bool:
    """Whether the FAISS index can give back the vectors exactly (else vectors.npy is kept)."""
    return "PQ" not in factory and "SQ" not in factory


def save(index, folder: Path) -> None:
    import faiss

    faiss.write_index(index, str(folder / DENSE_FILE))


def load(folder: Path):
    import faiss

    if not (folder / DENSE_FILE).is_file():  # faiss says only "RuntimeError: ... could not open"
        raise FileNotFoundError(f"no {DENSE_FILE} in {folder}")
    return faiss.read_index(str(folder / DENSE_FILE))


def vectors(index, folder: Path) -> np.ndarray:
    """The shard's original vectors (from vectors.npy when the index quantizes them)."""
    path = folder / VECTORS_FILE
    if path.exists():
        return np.load(path)
    return index.reconstruct_n(0, index.ntotal)


def search(index, info: DenseInfo, settings: IndexSettings, queries: np.ndarray, k: int,
           allowed: np.ndarray | None):
    """Top ``k`` (rows, scores) per query, restricted to ``allowed`` rows when given."""
    import faiss

    n_allowed = index.ntotal if allowed is None else int(allowed.sum())
    k = min(k, n_allowed)
    if k == 0:
        return [(np.zeros(0, np.int64), np.zeros(0))] * len(queries)
    opts, factory = settings.dense_options, info.factory
    kwargs = {}
    bitmap = None
    if allowed is not None and n_allowed < index.ntotal:
        bitmap = np.packbits(allowed, bitorder="little")  # kept alive for the duration of the search
        kwargs["sel"] = faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(bitmap))
    if factory.startswith("HNSW"):
        default_ef = 96 if "SQ8" in factory else 64
        params = faiss.SearchParametersHNSW(efSearch=max(opts.get("efSearch", default_ef), k), **kwargs)
    elif factory.startswith("IVF"):
        nlist = faiss.extract_index_ivf(index).nlist
        params = faiss.SearchParametersIVF(nprobe=min(nlist, opts.get("nprobe") or default_nprobe(nlist)), **kwargs)
        if "Refine" in factory:
            params = faiss.IndexRefineSearchParameters(k_factor=opts.get("k_factor", 8),
                                                       base_index_params=params, **kwargs)
    else:
        params = faiss.SearchParameters(**kwargs) if kwargs else None
    scores, rows = index.search(np.ascontiguousarray(queries, dtype=np.float32), k, params=params)
    del bitmap
    out = []
    for r, s in zip(rows, scores):
        keep = r >= 0
        out.append((r[keep].astype(np.int64), s[keep].astype(np.float64)))
    return out
