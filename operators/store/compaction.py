"""``Index.compact``: the live chunks rewritten into few shards, redone when another commit lands meanwhile.

Compaction reads one generation, writes its live chunks as new shards, and commits them in
place of every shard of that generation only if the index is still at that generation. A
commit that lands meanwhile (an add, a delete) would otherwise be lost, so the merge is
redone on the new generation, a few times, before it gives up. Shards with no live chunk are
left out of the merge. The superseded shard folders are not deleted here: a reader that read
the old manifest a moment before may be loading them. They become folders no commit records,
which ``remove_uncommitted`` deletes after its grace period (the commit restarts their clock). Their ids stay
committed (``Manifest.merged_shards``): an ingestion run again (to resume, or to take in documents appended to its
source) skips its shards that a compaction merged, as it skipped them before.

The shards are read one at a time, in manifest order (only their doc stores and vectors: no BM25 statistics), and
each new shard is written as soon as it is full, so a big index is never held whole. After each shard,
``on_progress`` hears a ``CompactProgress``: that shard's live chunks are in the new shards (the last new shard is
written before the last shard is reported, so the count ends at the total once everything is written; the commit
follows). A merge redone on a new generation starts its count again (``attempt``).

What it did is a ``CompactionSummary``, counted from the generation it merged (not from one read before or
after, which another commit may have changed): ``tessera index compact`` prints it and the service's compaction
task stores it as its result, so neither counts shards in its own words.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa

from operators.store import dense, shard as shard_io
from operators.store.errors import CommitConflictError, IndexCorruptError, IndexStoreError
from operators.store.layout import SHARDS, new_shard_id
from operators.store.upgrade import COMPACTED
from operators.store.settings import FORMAT, Manifest, ShardInfo
from operators.tables import concat


@dataclass(frozen=True)
class CompactionSummary:
    """What one ``Index.compact`` did: the shards it committed, and the generation it merged them from."""

    shards: tuple[ShardInfo, ...]  # the new shards, committed in place of every shard of the merged generation
    shards_before: int
    chunks_before: int             # chunks the merged shards held, deleted ones included
    tombstones_dropped: int        # deleted chunks that are gone from disk now
    generation: int                # the generation the compaction committed
    seconds: float                 # the whole call, redone merges included
    changed: bool = True           # False: already one compacted shard with nothing deleted, left as it was

    @property
    def shards_after(self) -> int:
        return len(self.shards)

    @property
    def chunks(self) -> int:
        """Live chunks, all of them in the new shards."""
        return sum(info.n_chunks for info in self.shards)

    def as_dict(self) -> dict[str, Any]:
        """The JSON a report or a task result carries (shard ids and files left out)."""
        return {"shards_before": self.shards_before, "shards_after": self.shards_after, "chunks": self.chunks,
                "chunks_before": self.chunks_before, "tombstones_dropped": self.tombstones_dropped,
                "generation": self.generation, "seconds": self.seconds, "changed": self.changed}


@dataclass(frozen=True)
class CompactProgress:
    """Where a compaction is: ``shard`` (of the generation it merges) is merged, the ``shards``-th of
    ``shards_total``; ``chunks`` of its live chunks are in new shards, of the ``chunks_total`` (deleted ones
    included) the merged shards held."""

    shard: str
    shards: int
    shards_total: int
    chunks: int
    chunks_total: int
    attempt: int = 1


CompactProgressCallback = Callable[[CompactProgress], None]


def compact(index, max_chunks: int, *, attempts: int,
            on_progress: CompactProgressCallback | None = None) -> CompactionSummary:
    """Compact ``index`` (an ``Index``) into shards of at most ``max_chunks``; what it did."""
    if isinstance(max_chunks, bool) or not isinstance(max_chunks, int) or max_chunks < 1:  # as --max-chunks is
        raise IndexStoreError(f"max_chunks must be a whole number of at least 1, not {max_chunks!r}",
                              field="max_chunks")
    started = time.perf_counter()
    for attempt in range(1, attempts + 1):
        manifest = index.manifest
        if _compacted_already(manifest, max_chunks):  # a rewrite would change nothing but the disk it takes
            counts = manifest.counts()
            return CompactionSummary(shards=tuple(manifest.shards), shards_before=counts["shards"],
                                     chunks_before=counts["chunks"], tombstones_dropped=0,
                                     generation=manifest.generation, seconds=round(time.perf_counter() - started, 3),
                                     changed=False)
        infos: list = []
        merged = _Merged(manifest, attempt, on_progress)
        made = {s.embedded_as for s in manifest.shards}  # one way of embedding for all: the merged shards' too
        embedded_as = next(iter(made)) if len(made) == 1 else None
        try:  # a failed write or commit leaves none of the new shards behind
            for part in _live_parts(index, manifest, max_chunks, merged):
                infos.append(index.write_shard(new_shard_id(COMPACTED), part, embedded_as=embedded_as))
            done = index._commit(infos, remove_shards=[s.id for s in manifest.shards],
                                 expected_generation=manifest.generation)
        except CommitConflictError as err:
            index.discard(infos)
            if attempt == attempts:
                raise CommitConflictError(f"{err.message} ({attempts} attempts: the index is changed faster than "
                                          "it is compacted; compact when it is quieter)") from None
            continue
        except BaseException:
            index.discard(infos)
            raise
        index.remove_uncommitted()
        counts = manifest.counts()
        return CompactionSummary(shards=tuple(infos), shards_before=counts["shards"], chunks_before=counts["chunks"],
                                 tombstones_dropped=counts["tombstones"], generation=done.generation,
                                 seconds=round(time.perf_counter() - started, 3))
    raise CommitConflictError(f"compaction of {index.path} needs at least one attempt, got {attempts}")


def _compacted_already(manifest: Manifest, max_chunks: int) -> bool:
    """Whether ``manifest`` is what compacting it would make: one shard a compaction of this layout wrote, of at most
    ``max_chunks``, nothing deleted (or no shard at all). Compacted again, each call rewrote it whole, and kept the
    old copy on disk for an hour."""
    return (manifest.format == FORMAT and not any(manifest.tombstones.values()) and len(manifest.shards) <= 1
            and all(s.id.startswith(COMPACTED) and s.n_chunks <= max_chunks for s in manifest.shards))


class _Merged:
    """Counts the shards merged in one attempt and tells ``on_progress``."""

    def __init__(self, manifest: Manifest, attempt: int, on_progress: CompactProgressCallback | None):
        self.total, self.chunks_total = len(manifest.shards), manifest.counts()["chunks"]
        self.attempt, self.on_progress = attempt, on_progress
        self.shards = self.chunks = 0

    def __call__(self, shard: str, live_chunks: int) -> None:
        self.shards += 1
        self.chunks += live_chunks
        if self.on_progress is not None:
            self.on_progress(CompactProgress(shard, self.shards, self.total, self.chunks, self.chunks_total,
                                             self.attempt))


def _live_parts(index, manifest: Manifest, max_rows: int, merged: Callable[[str, int], None]) -> Iterator[pa.Table]:
    """The live chunks of ``manifest``'s shards as ``write_shard`` tables of at most ``max_rows`` (with their
    ``vector``s when the index is dense), read a shard at a time; ``merged(shard, live chunks)`` after each shard,
    once the tables it filled are written (the caller writes a table before it asks for the next one)."""
    live = {info.id: np.nonzero(shard_io.live_mask(manifest, info.id, info.n_chunks))[0] for info in manifest.shards}
    # a shard with no live row is left out: its columns' types do not matter (an index that took a conflicting
    # type before commits checked types is repaired by deleting those documents and compacting)
    kept = [info for info in manifest.shards if len(live[info.id])]
    schemas = [(info.id, _read(index, manifest, info, schema_only=True)) for info in kept]
    try:
        schema = pa.unify_schemas([s for _, s in schemas], promote_options="permissive") if kept else None
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:
        raise _type_conflict(index, manifest, schemas) or err
    pending = _Pending()
    last = len(manifest.shards) - 1
    for position, info in enumerate(manifest.shards):
        rows = live[info.id]
        if len(rows):
            shard_docs, shard_vectors = _read(index, manifest, info)
            try:
                conformed = _conform(shard_docs.take(pa.array(rows)), schema)
            except (pa.ArrowInvalid, pa.ArrowTypeError) as err:  # values the merged type cannot hold
                raise _type_conflict(index, manifest, schemas) or err
            pending.add(conformed, None if shard_vectors is None else shard_vectors[rows])
        while pending.rows >= max_rows or (position == last and pending.rows):
            yield pending.take(max_rows)
        merged(info.id, len(rows))


class _Pending:
    """Live rows read but not written yet, as (doc table, vectors or None) pieces in order. ``take`` cuts the first
    rows off by slicing the pieces, so a shard far larger than a part is copied once, not once a part."""

    def __init__(self):
        self.pieces: deque[tuple[pa.Table, np.ndarray | None]] = deque()
        self.rows = 0

    def add(self, docs: pa.Table, vectors: np.ndarray | None) -> None:
        self.pieces.append((docs, vectors))
        self.rows += docs.num_rows

    def take(self, n: int) -> pa.Table:
        """The first ``n`` rows (all, when fewer), with their ``vector``s when the index is dense."""
        docs, vectors = [], []
        n = min(n, self.rows)
        while n:
            table, vecs = self.pieces.popleft()
            if table.num_rows > n:  # the rest of this piece stays first
                self.pieces.appendleft((table.slice(n), None if vecs is None else vecs[n:]))
                table, vecs = table.slice(0, n), None if vecs is None else vecs[:n]
            docs.append(table)
            vectors.append(vecs)
            n -= table.num_rows
            self.rows -= table.num_rows
        stacked = None if not vectors or vectors[0] is None else np.concatenate(vectors)
        return _with_vectors(concat(docs), stacked)


def _read(index, manifest: Manifest, info: ShardInfo, *, schema_only: bool = False):
    """A shard's doc-store schema, or its doc store and vectors (None for a BM25-only index) once its files are
    found sound. A damaged shard is an ``IndexCorruptError`` naming it; but when the manifest changed meanwhile
    (the shard was superseded, and removed), a ``CommitConflictError``: the merge is redone on the new one."""
    folder = index.path / SHARDS / info.id
    try:
        if schema_only:
            return shard_io.docs_schema(folder)
        problem = shard_io.damage(folder, info, checksums=index.verify)
        if problem:
            raise shard_io.damaged_error(index.path, {info.id: problem})
        vectors = dense.vectors(dense.load(folder), folder) if index.settings.dense else None
        return shard_io.read_docs(folder, None), vectors
    except (IndexCorruptError, OSError, pa.ArrowInvalid) as err:
        if index.generation != manifest.generation:
            raise CommitConflictError(f"index {index.path} changed (generation {manifest.generation} -> "
                                      f"{index.generation}) while it was compacted; retry") from None
        if isinstance(err, IndexCorruptError):
            raise
        raise shard_io.damaged_error(index.path, {info.id: f"cannot read it: {err}"}) from None


def _type_conflict(index, manifest: Manifest, schemas: list[tuple[str, pa.Schema]]):
    """The error naming the column whose live values the shards cannot merge (an index that took them before
    commits checked them: deleting those documents first repairs it), or None."""
    from operators.store.commits import live_values, type_conflict_error

    return type_conflict_error(index.path, schemas, live_values(index.path, manifest))


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with the columns of ``schema``, of its types (null where it has no such column), so the new
    shards' doc stores agree on each column whichever old shards their rows came from."""
    return pa.table([table.column(f.name).cast(f.type) if f.name in table.column_names
                     else pa.nulls(table.num_rows, f.type) for f in schema], schema=schema)


def _with_vectors(table: pa.Table, vectors: np.ndarray | None) -> pa.Table:
    if vectors is None:
        return table
    from operators.embed.sentence_transformer import vectors_to_arrow

    return table.append_column("vector", vectors_to_arrow(vectors))
