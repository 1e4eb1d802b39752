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
#: A pre-filter that at most this many rows of a shard pass is searched over them all, not by the index's walk.
EXACT_UP_TO = 4096


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
    """At most TRAIN_PER_LIST vectors per inverted list (PQ codebooks need 256 * 39), drawn reproducibly; every
    vector for IVF,SQ8, whose scalar quantizer takes each dimension's range from what it is trained on (a vector
    outside the sample's ranges was clipped: a score 0.01 off, where others were within 0.0006; FAISS's k-means
    samples the lists' training points itself)."""
    if not factory.startswith("IVF") or factory.endswith(",SQ8"):
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
    """Top ``k`` (rows, scores) per query, restricted to ``allowed`` rows when given.

    An approximate index filters only what its walk reaches: HNSW's ``efSearch`` nodes, IVF's ``nprobe`` lists. A
    pre-filter that few rows pass (one country of 2,000 documents) then left a query with 1 of its 10 results, so a
    query that came back short is searched again over every allowed row: IVF over all its lists, HNSW over its
    stored vectors, by brute force. A filter that at most ``EXACT_UP_TO`` rows pass goes that way at once: scoring
    them costs no more than the walk, and the top ``k`` is then exact (on HNSW and IVF without quantisation)."""
    import faiss

    n_allowed = index.ntotal if allowed is None else int(allowed.sum())
    k = min(k, n_allowed)
    if k == 0:
        return [(np.zeros(0, np.int64), np.zeros(0))] * len(queries)
    queries = np.ascontiguousarray(queries, dtype=np.float32)
    bitmap = None
    if allowed is not None and n_allowed < index.ntotal:
        bitmap = np.packbits(allowed, bitorder="little")  # kept alive for the duration of the search
    selector = None if bitmap is None else faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(bitmap))
    if selector is not None and n_allowed <= EXACT_UP_TO and not info.factory.startswith("Flat"):
        scores, rows = _every_allowed(index, info.factory, settings.dense_options, queries, k, selector)
    else:
        scores, rows = index.search(queries, k, params=_params(index, info.factory, settings.dense_options, k,
                                                                selector))
    short = np.flatnonzero((rows >= 0).sum(axis=1) < k) if selector is not None else []
    if len(short) and not info.factory.startswith("Flat"):
        scores[short], rows[short] = _every_allowed(index, info.factory, settings.dense_options, queries[short], k,
                                                    selector)
    del bitmap
    out = []
    for r, s in zip(rows, scores):
        keep = r >= 0
        out.append((r[keep].astype(np.int64), s[keep].astype(np.float64)))
    return out


def _params(index, factory: str, opts: dict, k: int, selector, every_list: bool = False):
    """The search parameters of ``factory`` (``every_list``: an IVF index probes all its lists)."""
    import faiss

    kwargs = {} if selector is None else {"sel": selector}
    if factory.startswith("HNSW"):
        default_ef = 96 if "SQ8" in factory else 64
        return faiss.SearchParametersHNSW(efSearch=max(opts.get("efSearch", default_ef), k), **kwargs)
    if factory.startswith("IVF"):
        nlist = faiss.extract_index_ivf(index).nlist
        nprobe = nlist if every_list else min(nlist, opts.get("nprobe") or default_nprobe(nlist))
        params = faiss.SearchParametersIVF(nprobe=nprobe, **kwargs)
        if "Refine" in factory:
            params = faiss.IndexRefineSearchParameters(k_factor=opts.get("k_factor", 8), base_index_params=params,
                                                       **kwargs)
        return params
    return faiss.SearchParameters(**kwargs) if kwargs else None


def _every_allowed(index, factory: str, opts: dict, queries: np.ndarray, k: int, selector):
    """(scores, rows) of ``queries`` over every row ``selector`` allows: HNSW's stored vectors (flat or SQ8 codes)
    scanned, IVF's lists all probed."""
    import faiss

    if factory.startswith("HNSW"):
        return faiss.downcast_index(index.storage).search(queries, k, params=faiss.SearchParameters(sel=selector))
    return index.search(queries, k, params=_params(index, factory, opts, k, selector, every_list=True))
