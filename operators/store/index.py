"""``Index``: a directory of immutable shards tied together by ``manifest.json``.

Writers (``write_shard``) only add shard folders, so Ray workers may write in
parallel; ``commit`` is the single point that changes what is searchable: under an
fcntl lock it re-reads the manifest, records finished shards and tombstones, and
replaces the manifest atomically. Readers load shards lazily, once, and notice a
newer manifest by its file stat. Deletes and upserts are tombstones (row positions
per shard), so nothing is rebuilt; BM25 statistics are re-derived over live chunks.

Usage::

    index = Index.create("idx", IndexSettings(dense=False))
    index.add(pa.table({"docno": ["d1"], "doc_id": ["d1"], "text": ["honey bees"]}))
    index.search_bm25(["bees"], k=10)[0].docnos  # ['d1']
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pyarrow as pa
from pydantic import ValidationError

from operators.atomic import write_bytes
from operators.home import tessera_home
from operators.store import bm25, dense, shard as shard_io
from operators.store.errors import (CommitError, DocnoNotFoundError, IndexCorruptError, IndexExistsError,
                                    IndexNotFoundError, IndexStoreError, ShardDataError)
from operators.store.settings import IndexSettings, Manifest, ShardInfo

MANIFEST, LOCK, SHARDS = "manifest.json", ".lock", "shards"
#: Work (queries x documents) from which a BM25 search runs its shards on threads.
PARALLEL_BM25_CELLS = 2_000_000


def resolve_index(name_or_path: str | os.PathLike) -> Path:
    """An existing path as given, else ``$TESSERA_HOME/indices/<name>`` for a bare name."""
    given = Path(name_or_path).expanduser()
    if given.exists() or given.is_absolute() or len(given.parts) > 1:
        return given
    return tessera_home() / "indices" / str(name_or_path)


@dataclass
class Hits:
    """One query's results, best first.

    ``shard``/``row`` locate each hit in the shards of the generation that was searched
    (``state``), so ``Index.documents_of`` reads their doc-store rows without looking
    docnos up again (and from the same snapshot, even if a commit lands in between)."""

    docnos: list[str]
    scores: np.ndarray
    shard: np.ndarray | None = None
    row: np.ndarray | None = None
    state: "_State | None" = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.docnos)


@dataclass
class _State:
    """What one manifest generation makes searchable, derived lazily and cached."""

    manifest: Manifest
    shards: list[shard_io.Shard]
    live: list[np.ndarray]  # per shard: rows not tombstoned
    retrievers: list | None = None
    lookup: dict[str, tuple[int, int]] | None = None
    masks: dict[str, list[np.ndarray | None]] = field(default_factory=dict)
    unfiltered: list[np.ndarray | None] | None = None  # the rows a search without a filter may return


class Index:
    """A sharded BM25 + dense index on disk (see the module docstring)."""

    def __init__(self, path: Path, manifest: Manifest, *, verify: bool = True) -> None:
        self.path = path
        self.verify = verify
        self._manifest = manifest
        self._manifest_file = os.fspath(path / MANIFEST)  # stat-ed by every search: joined once
        self._stat = self._manifest_stat()
        self._lock = threading.RLock()
        self._loaded: dict[tuple[str, str], shard_io.Shard] = {}
        self._ids: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
        self._state: _State | None = None
        self._pool: ThreadPoolExecutor | None = None

    def __reduce__(self):  # Ray tasks get a handle that reopens the index where it lands
        return (Index.open, (str(self.path),), {"verify": self.verify})

    def __setstate__(self, state: dict) -> None:
        self.verify = state["verify"]

    # -- create / open -----------------------------------------------------------------

    @classmethod
    def create(cls, path: str | os.PathLike, settings: IndexSettings | dict | None = None) -> "Index":
        """A new empty index at ``path``; an index with the same settings there is opened instead."""
        path = Path(path).expanduser()
        try:
            settings = IndexSettings.model_validate(settings or {}) if not isinstance(settings, IndexSettings) \
                else settings
        except ValidationError as err:
            first = err.errors()[0]
            raise IndexStoreError(f"bad index settings: {first['msg']}",
                                  field=".".join(map(str, first["loc"])) or None) from None
        path.mkdir(parents=True, exist_ok=True)
        with _file_lock(path):
            if (path / MANIFEST).exists():
                existing = cls.open(path)
                if existing.settings != settings:
                    ours, theirs = settings.model_dump(), existing.settings.model_dump()
                    diff = {k: (theirs[k], ours[k]) for k in ours if ours[k] != theirs[k]}
                    raise IndexExistsError(f"an index with other settings exists at {path}: "
                                           f"(existing, requested) = {diff}")
                return existing
            manifest = Manifest(settings=settings)
            _write_manifest(path, manifest)
        return cls(path, manifest)

    @classmethod
    def open(cls, path: str | os.PathLike, *, verify: bool = True) -> "Index":
        """The index at ``path`` (or the named index under $TESSERA_HOME/indices); ``verify`` checks
        each shard file's sha256 when the shard loads."""
        path = resolve_index(path)
        return cls(path, _read_manifest(path), verify=verify)

    # -- what is in it -------------------------------------------------------------------

    @property
    def settings(self) -> IndexSettings:
        return self._manifest.settings

    @property
    def manifest(self) -> Manifest:
        self.refresh()
        return self._manifest

    @property
    def generation(self) -> int:
        return self.manifest.generation

    def finished_shards(self) -> set[str]:
        """Ids of committed shards (a resumed ingestion skips them)."""
        return {s.id for s in self.manifest.shards}

    def counts(self) -> dict[str, Any]:
        """Shards, chunks written, tombstones, live chunks."""
        return self.manifest.counts()

    def __len__(self) -> int:
        return self.counts()["live_chunks"]

    def __repr__(self) -> str:
        return f"Index({str(self.path)!r}, generation={self._manifest.generation}, {self._manifest.counts()})"

    def refresh(self) -> bool:
        """Re-read the manifest if another process replaced it; True when it changed."""
        stat = self._manifest_stat()
        if stat == self._stat:
            return False
        with self._lock:
            manifest = _read_manifest(self.path)
            self._stat = stat
            changed = manifest.generation != self._manifest.generation
            self._manifest = manifest
            return changed

    def _manifest_stat(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._manifest_file)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns, st.st_size)

    # -- writing -------------------------------------------------------------------------

    def write_shard(self, shard_id: str, chunks: pa.Table) -> ShardInfo:
        """Write ``shards/<shard_id>`` atomically (not visible until ``commit``).

        ``chunks``: docno, doc_id, text, [title], [metadata...], and ``vector``
        (fixed_size_list<float32>[dim]) when the index is dense. Safe from parallel
        processes; an uncommitted shard id may be written again, a committed one may not.
        """
        shard_io.check_shard_id(shard_id)
        if shard_id in self.finished_shards():
            raise ShardDataError(f"shard {shard_id!r} is already committed in {self.path}; "
                                 "shards are immutable: write under a new id", field="shard_id")
        return shard_io.write(self.path / SHARDS, self.settings, shard_id, chunks)

    def commit(self, infos: Sequence[ShardInfo], *, replace_doc_ids: Iterable[str] | None = None) -> None:
        """Record finished shards in the manifest; with ``replace_doc_ids``, tombstone the chunks of
        those doc ids in every other shard in the same manifest write. Committing a shard again is a no-op."""
        self._commit(infos, replace_doc_ids=replace_doc_ids)

    def add(self, chunks: pa.Table, shard_id: str | None = None) -> ShardInfo:
        """Add chunks as a new shard; their docnos must not be live yet."""
        info = self.write_shard(shard_id or _new_shard_id("add"), chunks)
        self.commit([info])
        return info

    def upsert(self, chunks: pa.Table, shard_id: str | None = None) -> ShardInfo:
        """Replace every chunk of the doc ids in ``chunks`` by ``chunks``: a new shard and tombstones,
        in one commit (if writing fails, the old version stays)."""
        info = self.write_shard(shard_id or _new_shard_id("upsert"), chunks)
        doc_ids = set(chunks.column("doc_id").cast(pa.string()).to_pylist())
        self.commit([info], replace_doc_ids=doc_ids)
        return info

    def delete(self, doc_ids: Iterable[str] | None = None, docnos: Iterable[str] | None = None) -> int:
        """Tombstone every live chunk of ``doc_ids`` and the chunks ``docnos``; returns how many."""
        if doc_ids is None and docnos is None:
            raise IndexStoreError("delete needs doc_ids or docnos")
        return self._commit([], replace_doc_ids=doc_ids, delete_docnos=docnos)

    def compact(self, max_chunks: int = 100_000) -> list[ShardInfo]:
        """Rewrite the live chunks into new shards of at most ``max_chunks`` and drop the old shards
        and their tombstones. Fails (changing nothing) if another commit lands meanwhile."""
        state = self._current()
        generation = state.manifest.generation
        tables, vectors = [], []
        for sh, live in zip(state.shards, state.live):
            rows = pa.array(np.nonzero(live)[0])
            tables.append(sh.docs.take(rows))
            if self.settings.dense:
                vectors.append(sh.vectors()[np.nonzero(live)[0]])
        from operators.tables import concat

        docs = concat(tables)
        infos = []
        if docs.num_rows:
            all_vectors = np.concatenate(vectors) if vectors else None
            for start in range(0, docs.num_rows, max_chunks):
                part = docs.slice(start, max_chunks)
                if all_vectors is not None:
                    from operators.embed.sentence_transformer import vectors_to_arrow

                    part = part.append_column("vector", vectors_to_arrow(all_vectors[start:start + max_chunks]))
                infos.append(self.write_shard(_new_shard_id("compact"), part))
        old = [s.info.id for s in state.shards]
        self._commit(infos, remove_shards=old, expected_generation=generation)
        for shard_id in old:
            import shutil

            shutil.rmtree(self.path / SHARDS / shard_id, ignore_errors=True)
        return infos

    def _commit(self, infos: Sequence[ShardInfo], *, replace_doc_ids=None, delete_docnos=None,
                remove_shards: Sequence[str] = (), expected_generation: int | None = None) -> int:
        replace = set(replace_doc_ids or ())
        drop_docnos = set(delete_docnos or ())
        with self._lock, _file_lock(self.path):
            manifest = _read_manifest(self.path)
            if expected_generation is not None and manifest.generation != expected_generation:
                raise CommitError(f"index {self.path} changed (generation {expected_generation} -> "
                                  f"{manifest.generation}) while this commit was prepared; retry")
            committed = {s.id: s for s in manifest.shards}
            new: list[ShardInfo] = []
            for info in infos:
                on_disk = shard_io.read_info(self.path / SHARDS / info.id)
                if on_disk is None:
                    raise CommitError(f"shard {info.id!r} was not written (no {SHARDS}/{info.id}/"
                                      f"{shard_io.INFO_FILE} in {self.path})", field="shard_id")
                # The files on disk are the truth: a retried write of the same id may have replaced them.
                if info.id in committed and committed[info.id].token == on_disk.token:
                    continue
                new.append(on_disk)
            new_ids = {s.id for s in new}
            if len(new_ids) != len(new):
                raise CommitError("the same shard id is committed twice in one commit")
            tombstones = {k: set(v) for k, v in manifest.tombstones.items()
                          if k not in new_ids and k not in remove_shards}
            old = [s for s in manifest.shards if s.id not in new_ids and s.id not in remove_shards]
            n_tombstoned = 0
            live_docnos: set[str] = set()
            for info in old:
                docnos, doc_ids = self._shard_ids(info)
                dead = tombstones.setdefault(info.id, set())
                alive = np.ones(len(docnos), dtype=bool)
                alive[list(dead)] = False
                hit = np.zeros(len(docnos), dtype=bool)
                if replace:
                    hit |= np.fromiter((d in replace for d in doc_ids), dtype=bool, count=len(doc_ids))
                if drop_docnos:
                    hit |= np.fromiter((d in drop_docnos for d in docnos), dtype=bool, count=len(docnos))
                hit &= alive
                rows = np.nonzero(hit)[0]
                dead.update(rows.tolist())
                n_tombstoned += len(rows)
                alive[rows] = False
                if new:
                    live_docnos.update(docnos[alive].tolist())
            for info in new:
                docnos, _ = self._shard_ids(info)
                clash = [d for d in docnos.tolist() if d in live_docnos]
                if clash:
                    raise CommitError(f"shard {info.id!r}: docno(s) {clash[:5]} ({len(clash)} in all) are already "
                                      f"live in {self.path}; use upsert to replace them", field="docno")
                live_docnos.update(docnos.tolist())
            manifest.shards = old + new
            manifest.tombstones = {k: sorted(v) for k, v in tombstones.items() if v}
            manifest.generation += 1
            manifest.updated_at = time.time()
            _write_manifest(self.path, manifest)
            self._manifest, self._stat = manifest, self._manifest_stat()
        return n_tombstoned

    def _shard_ids(self, info: ShardInfo) -> tuple[np.ndarray, np.ndarray]:
        """(docnos, doc_ids) of a shard, read once per shard version."""
        key = (info.id, info.token)
        if key not in self._ids:
            import pyarrow.parquet as pq

            path = self.path / SHARDS / info.id / shard_io.DOCS_FILE
            try:
                table = pq.read_table(path, columns=["docno", "doc_id"])
            except (OSError, pa.ArrowInvalid) as err:
                raise IndexCorruptError(f"shard {info.id!r}: cannot read {path}: {err}") from None
            self._ids[key] = tuple(np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=object)
                                   for c in ("docno", "doc_id"))
        return self._ids[key]

    # -- reading -------------------------------------------------------------------------

    def _current(self) -> _State:
        self.refresh()
        with self._lock:
            manifest = self._manifest
            if self._state is not None and self._state.manifest.generation == manifest.generation:
                return self._state
            shards, live = [], []
            for info in manifest.shards:
                key = (info.id, info.token)
                if key not in self._loaded:
                    self._loaded[key] = shard_io.Shard(self.path / SHARDS / info.id, info, self.settings,
                                                       verify=self.verify)
                sh = self._loaded[key]
                mask = np.ones(len(sh), dtype=bool)
                mask[manifest.tombstones.get(info.id, [])] = False
                shards.append(sh)
                live.append(mask)
            current = {(s.id, s.token) for s in manifest.shards}
            self._loaded = {k: v for k, v in self._loaded.items() if k in current}
            self._state = _State(manifest=manifest, shards=shards, live=live)
            return self._state

    def _allowed(self, state: _State, where) -> list[np.ndarray | None]:
        """Per shard, rows a search may return (None: every row)."""
        if where is None:
            if state.unfiltered is None:
                state.unfiltered = [None if m.all() else m for m in state.live]
            return state.unfiltered
        key = str(where)
        with self._lock:
            if key not in state.masks:
                masks, errors = [], []
                for sh, live in zip(state.shards, state.live):
                    try:
                        masks.append(live & sh.matches(where))
                    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError) as err:
                        errors.append(err)  # a column this shard lacks: none of its rows match
                        masks.append(np.zeros(len(sh), dtype=bool))
                if errors and len(errors) == len(state.shards):
                    columns = sorted({c for s in state.shards for c in s.docs.column_names})
                    raise IndexStoreError(f"filter {where} does not apply to the doc store ({errors[0]}); "
                                          f"columns: {columns}", field="where")
                state.masks = {key: masks} if len(state.masks) > 16 else {**state.masks, key: masks}
            return state.masks[key]

    def _map(self, fn, items: list, parallel: bool = True) -> list:
        """``fn(*item)`` for each item: on the index's thread pool (one task per shard) when
        ``parallel`` and there are several, else in this thread."""
        if len(items) <= 1 or not parallel:
            return [fn(*item) for item in items]
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=min(8, os.cpu_count() or 1),
                                                    thread_name_prefix="tessera-index")
        return list(self._pool.map(lambda item: fn(*item), items))

    def search_bm25(self, queries: Sequence[str], k: int, where=None) -> list[Hits]:
        """BM25 top ``k`` per query over live chunks (matching ``where``), exact across shards."""
        if not self.settings.bm25:
            raise IndexStoreError(f"index {self.path} has no BM25 statistics (settings.bm25 is false)")
        _check_k(k)
        state = self._current()
        if state.retrievers is None:
            with self._lock:
                if state.retrievers is None:
                    state.retrievers = bm25.build_retrievers([s.terms for s in state.shards], state.live,
                                                             self.settings)
        allowed = self._allowed(state, where)
        jobs = [(i, r, a) for i, (r, a) in enumerate(zip(state.retrievers, allowed))
                if r is not None and (a is None or a.any())]
        if not jobs or not queries:
            return _merge(state, [], len(queries), k)
        tokens = bm25.tokenize_queries(list(queries), self.settings)
        ids = bm25.query_term_ids(tokens, jobs[0][1].vocab_dict)  # one vocabulary, shared by every shard
        # A shard search is a few numpy passes over (queries x shard documents) floats; below
        # PARALLEL_BM25_CELLS of them, handing shards to threads costs more than it saves.
        parallel = len(jobs) > 1 and \
            len(queries) * sum(r.scores["num_docs"] for _, r, _ in jobs) >= PARALLEL_BM25_CELLS
        found = self._map(lambda i, r, a: (i, bm25.search_shard(r, ids, k, a)), jobs, parallel=parallel)
        return _merge(state, found, len(queries), k)

    def search_dense(self, vectors: np.ndarray, k: int, where=None) -> list[Hits]:
        """Inner-product top ``k`` per query vector over live chunks (matching ``where``)."""
        if not self.settings.dense:
            raise IndexStoreError(f"index {self.path} has no dense vectors (settings.dense is false)")
        _check_k(k)
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[1] != self.settings.dim:
            raise IndexStoreError(f"query vectors must be (n, {self.settings.dim}), got shape {vectors.shape}",
                                  field="vectors")
        state = self._current()
        allowed = self._allowed(state, where)
        jobs = [(i, sh, a) for i, (sh, a) in enumerate(zip(state.shards, allowed)) if a is None or a.any()]
        found = self._map(lambda i, sh, a: (i, dense.search(sh.dense, sh.info.dense, self.settings, vectors, k, a)),
                          jobs) if len(vectors) else []
        return _merge(state, found, len(vectors), k)

    def documents(self, docnos: Sequence[str]) -> pa.Table:
        """Doc-store rows of live chunks ``docnos``, in the given order."""
        state = self._current()
        with self._lock:
            if state.lookup is None:
                state.lookup = {}
                for i, (sh, live) in enumerate(zip(state.shards, state.live)):
                    rows = np.nonzero(live)[0]
                    state.lookup.update(zip(sh.docnos[rows].tolist(), ((i, int(r)) for r in rows)))
        places = [state.lookup.get(d) for d in docnos]
        missing = [d for d, p in zip(docnos, places) if p is None]
        if missing:
            raise DocnoNotFoundError(f"docno(s) {missing[:5]} ({len(missing)} in all) are not live in {self.path}",
                                     field="docno")
        return _take_rows(state, np.array([p[0] for p in places], dtype=np.int64),
                          np.array([p[1] for p in places], dtype=np.int64))

    def documents_of(self, hits: Sequence[Hits]) -> pa.Table:
        """Doc-store rows of every hit of ``hits``, in order: ``documents`` of their docnos, read
        by position from the generation each search saw (hits of other origins: by docno)."""
        if len(hits) == 1 and len(hits[0]) and hits[0].state is not None and hits[0].shard is not None:
            return _take_rows(hits[0].state, hits[0].shard, hits[0].row)  # one query (the low-latency case)
        found = [h for h in hits if len(h)]
        state = found[0].state if found else None
        if state is None or any(h.state is not state or h.shard is None for h in found):
            return self.documents([d for h in hits for d in h.docnos])
        return _take_rows(state, np.concatenate([h.shard for h in found]), np.concatenate([h.row for h in found]))


def _take_rows(state: _State, shard: np.ndarray, rows: np.ndarray) -> pa.Table:
    """Doc-store rows ``rows`` of shards ``shard`` (parallel arrays), in that order."""
    if not len(rows):
        return state.shards[0].docs.slice(0, 0) if state.shards else pa.table({"docno": pa.array([], pa.string())})
    from operators.tables import concat

    if len(state.shards) == 1 or (shard == shard[0]).all():  # one shard (the common case): one take
        return state.shards[int(shard[0])].docs.take(rows)
    parts, positions = [], []
    for i in np.unique(shard):
        picked = np.nonzero(shard == i)[0]
        parts.append(state.shards[i].docs.take(pa.array(rows[picked])))
        positions.append(picked)
    table = concat(parts)
    inverse = np.empty(len(rows), dtype=np.int64)
    inverse[np.concatenate(positions)] = np.arange(len(rows))
    return table.take(pa.array(inverse))


def _check_k(k: int) -> None:
    if not isinstance(k, (int, np.integer)) or k <= 0:
        raise IndexStoreError(f"k must be a positive integer, got {k!r}", field="k")


def _merge(state: _State, found: list, n_queries: int, k: int) -> list[Hits]:
    """Exact top ``k`` per query from every shard's top ``k``; ties broken by docno.

    ``found`` holds ``(shard index, [(rows, scores) per query])`` per searched shard. Hits
    from one shard with strictly falling scores are already in this order and skip the
    sort on docno strings (most queries of a one-shard index)."""
    if not found:  # no shard was searched (none live, or none matches the filter)
        return [Hits([], np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64), state) for _ in range(n_queries)]
    if len(found) == 1:
        i, results = found[0]
        docnos = state.shards[i].docnos
        return [_hits(state, np.full(len(rows), i), rows, scores, docnos[rows], k) for rows, scores in results]
    out = []
    for q in range(n_queries):
        parts = [(i, res[q][0], res[q][1]) for i, res in found]
        out.append(_hits(state, np.concatenate([np.full(len(rows), i) for i, rows, _ in parts]),
                         np.concatenate([rows for _, rows, _ in parts]),
                         np.concatenate([scores for _, _, scores in parts]),
                         np.concatenate([state.shards[i].docnos[rows] for i, rows, _ in parts]), k))
    return out


def _hits(state: _State, shard: np.ndarray, rows: np.ndarray, scores: np.ndarray, docnos: np.ndarray,
          k: int) -> Hits:
    """One query's top ``k`` of these candidates: score descending, then docno."""
    if len(scores) > 1 and not (scores[:-1] > scores[1:]).all():
        order = np.lexsort((docnos.astype(str), -scores))[:k]
        shard, rows, scores, docnos = shard[order], rows[order], scores[order], docnos[order]
    elif len(scores) > k:
        shard, rows, scores, docnos = shard[:k], rows[:k], scores[:k], docnos[:k]
    return Hits(docnos.tolist(), scores, shard, rows, state)


def _new_shard_id(kind: str) -> str:
    return f"{kind}-{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def _file_lock(path: Path):
    """The index's single-writer lock (fcntl.flock on ``.lock``), across processes and threads."""
    fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _read_manifest(path: Path) -> Manifest:
    file = path / MANIFEST
    if not file.is_file():
        hint = "" if path.exists() else " (the directory does not exist)"
        raise IndexNotFoundError(f"no index at {path}: {file} not found{hint}; create one with Index.create "
                                 "or `tessera index add`")
    try:
        raw = shard_io.read_manifest_json(file)
    except FileNotFoundError:  # replaced between the check and the read
        raw = shard_io.read_manifest_json(file)
    if isinstance(raw, dict) and raw.get("format") not in (None, 1):
        raise IndexCorruptError(f"{file}: format {raw.get('format')!r} is not supported (this Tessera reads 1)")
    try:
        return Manifest.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        raise IndexCorruptError(f"{file}: {first['msg']} at {'.'.join(map(str, first['loc']))}") from None


def _write_manifest(path: Path, manifest: Manifest) -> None:
    write_bytes(path / MANIFEST, manifest.model_dump_json(indent=1).encode("utf-8"))
