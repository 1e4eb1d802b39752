"""Searching one generation of an index (BM25 or dense top-k over its live shards, one task per shard) and
reading the doc-store rows of what it found.

Why apart from ``operators.store.index``: ``Index`` decides which generation a search sees (a
``Snapshot``, retried once if a compaction removed a shard meanwhile: ``current``); what the search then
does (which shards to visit, whether threads pay off, the exact merge) depends on that snapshot and the
index's settings alone.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa

from operators.store import bm25, dense
from operators.store.errors import DocnoNotFoundError, IndexStoreError
from operators.store.settings import IndexSettings
from operators.store.snapshot import Hits, Snapshot

#: Work (queries x documents) from which a BM25 search runs its shards on threads.
PARALLEL_BM25_CELLS = 2_000_000


_threads: ThreadPoolExecutor | None = None
_threads_lock = threading.Lock()


class ShardPool:
    """Per-shard work of one index on the process's threads for shard searches (at most 8, one per core), started
    on the first search that runs shards in parallel. Every index shares them: a pool of each index's own, never
    shut down, kept its threads for the life of the process, so a program that searched many indices held
    threads by the hundred. (A shard's search runs no shard search of its own, so none waits on the pool.)"""

    def map(self, fn: Callable, items: list, parallel: bool = True) -> list:
        """``fn(*item)`` for each item: on the threads (one task per shard) when ``parallel`` and there are
        several, else in this thread."""
        global _threads
        if len(items) <= 1 or not parallel:
            return [fn(*item) for item in items]
        if _threads is None:
            with _threads_lock:
                if _threads is None:
                    _threads = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1),
                                                  thread_name_prefix="tessera-index")
        return list(_threads.map(lambda item: fn(*item), items))


def check_k(k: int) -> None:
    if not isinstance(k, (int, np.integer)) or k <= 0:
        raise IndexStoreError(f"k must be a positive integer, got {k!r}", field="k")


def bm25_hits(path: Path, settings: IndexSettings, current: Callable[[], Snapshot], queries: Sequence[str], k: int,
              where, pool: ShardPool) -> list[Hits]:
    """BM25 top ``k`` per query over the live chunks of the ``current()`` generation (matching ``where``), exact
    across shards."""
    if not settings.bm25:
        raise IndexStoreError(f"index {path} has no BM25 statistics (settings.bm25 is false)")
    check_k(k)
    state = current()
    retrievers = state.bm25_retrievers()
    allowed = state.allowed(where)
    jobs = [(i, r, a) for i, (r, a) in enumerate(zip(retrievers, allowed))
            if r is not None and (a is None or a.any())]
    if not jobs or not queries:
        return state.merge([], len(queries), k)
    tokens = bm25.tokenize_queries(list(queries), settings)
    ids = bm25.query_term_ids(tokens, jobs[0][1].vocab_dict)  # one vocabulary, shared by every shard
    # A shard search is a few numpy passes over (queries x shard documents) floats; below
    # PARALLEL_BM25_CELLS of them, handing shards to threads costs more than it saves.
    parallel = len(jobs) > 1 and \
        len(queries) * sum(r.scores["num_docs"] for _, r, _ in jobs) >= PARALLEL_BM25_CELLS
    found = pool.map(lambda i, r, a: (i, bm25.search_shard(r, ids, k, a)), jobs, parallel=parallel)
    return state.merge(found, len(queries), k)


def dense_hits(path: Path, settings: IndexSettings, current: Callable[[], Snapshot], vectors: np.ndarray, k: int,
               where, pool: ShardPool) -> list[Hits]:
    """Inner-product top ``k`` per query vector over the live chunks of the ``current()`` generation (matching
    ``where``)."""
    if not settings.dense:
        raise IndexStoreError(f"index {path} has no dense vectors (settings.dense is false)")
    check_k(k)
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[1] != settings.dim:
        raise IndexStoreError(f"query vectors must be (n, {settings.dim}), got shape {vectors.shape}",
                              field="vectors")
    state = current()
    allowed = state.allowed(where)
    jobs = [(i, sh, a) for i, (sh, a) in enumerate(zip(state.shards, allowed)) if a is None or a.any()]
    found = pool.map(lambda i, sh, a: (i, dense.search(sh.dense, sh.info.dense, settings, vectors, k, a)),
                     jobs) if len(vectors) else []
    return state.merge(found, len(vectors), k)


def documents(path: Path, state: Snapshot, docnos: Sequence[str]) -> pa.Table:
    """Doc-store rows of the live chunks ``docnos`` of ``state``, in the given order."""
    places = state.locate(docnos)
    missing = [d for d, p in zip(docnos, places) if p is None]
    if missing:
        raise DocnoNotFoundError(f"docno(s) {missing[:5]} ({len(missing)} in all) are not live in {path}",
                                 field="docno")
    return state.take_rows(np.array([p[0] for p in places], dtype=np.int64),
                           np.array([p[1] for p in places], dtype=np.int64))


def documents_of(hits: Sequence[Hits], by_docno: Callable[[list[str]], pa.Table]) -> pa.Table:
    """Doc-store rows of every hit of ``hits``, in order, read by position from the generation each search saw;
    hits of other origins (or of several generations) are read ``by_docno`` (``Index.documents``)."""
    if len(hits) == 1 and len(hits[0]) and hits[0].state is not None and hits[0].shard is not None:
        return hits[0].state.take_rows(hits[0].shard, hits[0].row)  # one query (the low-latency case)
    found = [h for h in hits if len(h)]
    state = found[0].state if found else None
    if state is None or any(h.state is not state or h.shard is None for h in found):
        return by_docno([d for h in hits for d in h.docnos])
    return state.take_rows(np.concatenate([h.shard for h in found]), np.concatenate([h.row for h in found]))
