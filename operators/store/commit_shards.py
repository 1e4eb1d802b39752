"""Which written shards one commit records: ``Index._commit``'s work while it holds the index's lock.

Why apart from ``operators.store.index``: this is the part of a commit that decides, from the manifest
as it is now and the shard folders on disk, what the commit changes (``commits.apply`` then records the
shards and tombstones), with what it reads of each shard kept per shard version (``ShardReads``). The
index keeps what only it can do: take its locks, read and write the manifest, and remember the new one.

A compaction (``remove_shards``) gives the shards it merges new ids, but what was committed stays committed: an
ingestion counts its shards as finished by their ids, and would otherwise process them again (refused: their
documents are live) and report them unfinished. So the manifest keeps the ids of every shard a compaction
merged (``Manifest.merged_shards``), over later compactions too, and ``finished`` counts them with the shards it
lists. They are kept when the documents are deleted or replaced since, as the tombstoned shard itself was: an
ingestion run again skips a finished shard whether or not its documents are still live, and a compaction does not
change that. A manifest of format 1 has no such record; what a compaction by an earlier release merged is recovered
when it is read (``operators.store.upgrade``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa

from operators.store import commits, shard as shard_io
from operators.store.commits import Commit
from operators.store.errors import CommitConflictError, CommitError
from operators.store.layout import SHARDS
from operators.store.settings import Manifest, ShardInfo

class ShardReads:
    """What commits read of each written shard, read once per shard version (id and token): its docnos and doc
    ids (for tombstones and clashes), its doc-store schema (for the column type check); and a column's values,
    each time (the rare commit whose column types differ checks that they fit the type they merge to)."""

    def __init__(self, shards_dir: Path) -> None:
        self.shards_dir = shards_dir
        self._ids: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
        self._schemas: dict[tuple[str, str], pa.Schema] = {}

    def ids(self, info: ShardInfo) -> tuple[np.ndarray, np.ndarray]:
        """(docnos, doc_ids) of a shard, as object arrays."""
        key = (info.id, info.token)
        if key not in self._ids:
            table = shard_io.read_docs(self.shards_dir / info.id, ["docno", "doc_id"])
            self._ids[key] = tuple(np.asarray(table.column(c).to_numpy(zero_copy_only=False), dtype=object)
                                   for c in ("docno", "doc_id"))
        return self._ids[key]

    def schema(self, info: ShardInfo) -> pa.Schema:
        """The doc-store schema of a shard (what a commit checks column types against)."""
        key = (info.id, info.token)
        if key not in self._schemas:
            self._schemas[key] = shard_io.docs_schema(self.shards_dir / info.id)
        return self._schemas[key]

    def column(self, info: ShardInfo, name: str) -> pa.ChunkedArray:
        """Every value of a shard's doc-store column ``name`` (what a commit checks fits the type the column merges
        to; read only where its type is not that one, so not kept)."""
        return shard_io.read_docs(self.shards_dir / info.id, [name]).column(name)


def merged(manifest: Manifest) -> set[str]:
    """Ids of the shards that compactions merged into the shards ``manifest`` lists (committed, not listed)."""
    return set(manifest.merged_shards)


def finished(manifest: Manifest) -> set[str]:
    """Ids of every shard committed into the index: those ``manifest`` lists and those a compaction merged."""
    return {s.id for s in manifest.shards} | merged(manifest)


def record(manifest: Manifest, infos: Sequence[ShardInfo], reads: ShardReads, *, path: Path, replace: set[str],
           drop_docnos: set[str], remove_shards: Sequence[str], expected_generation: int | None,
           refuse_live_doc_ids: bool | Callable[[str], bool] = False) -> Commit:
    """One commit of ``infos`` into ``manifest`` (read under the index's lock, written back by the caller,
    ``Index._commit``), with the tombstones of ``commits.apply``; returns what it did. ``remove_shards``: the
    shards a compaction merged into ``infos``; their ids stay finished (``Manifest.merged_shards``).

    The shards' files on disk are the truth: a retried write of the same id may have replaced them, and a
    shard committed before with the same token is not recorded again, nor one a compaction merged since.
    ``Commit.already`` names the shards committed before this commit (``finished``), so a caller does not count
    another writer's commit as its own; when it names them all, the commit tombstones nothing. With
    ``expected_generation``, a manifest that another commit changed meanwhile is a ``CommitConflictError``
    (``Index.compact`` redoes)."""
    if expected_generation is not None and manifest.generation != expected_generation:
        raise CommitConflictError(f"index {path} changed (generation {expected_generation} -> "
                                  f"{manifest.generation}) while this commit was prepared; retry")
    committed = {s.id: s for s in manifest.shards}
    compacted = merged(manifest)
    new: list[ShardInfo] = []
    for info in infos:
        if info.id in compacted:  # committed before, then merged: its documents are live in another shard
            continue
        on_disk = shard_io.read_info(path / SHARDS / info.id)
        if on_disk is None:
            raise CommitError(f"shard {info.id!r} was not written (no {SHARDS}/{info.id}/"
                              f"{shard_io.INFO_FILE} in {path})", field="shard_id")
        if info.id in committed and committed[info.id].token == on_disk.token:
            continue
        new.append(on_disk)  # a committed id whose folder a later write replaced: recorded as it is on disk now
    already = tuple(info.id for info in infos if info.id in committed or info.id in compacted)
    if infos and not new:  # committed before by another writer of these ids (two ingests of a source): what they
        replace, drop_docnos = set(), set()  # replace went then; now it would be their own documents (``--replace``)
    n_tombstoned, n_new, per_doc = commits.apply(
        manifest, new, reads.ids, path=path, replace=replace, drop_docnos=drop_docnos, remove_shards=remove_shards,
        schema=reads.schema, column=reads.column, refuse_live_doc_ids=refuse_live_doc_ids)
    if remove_shards:
        manifest.merged_shards = sorted(compacted | set(remove_shards))
    for shard_id in remove_shards:  # superseded: their grace before remove_uncommitted starts now
        try:
            os.utime(path / SHARDS / shard_id)
        except FileNotFoundError:
            pass
    return Commit(generation=manifest.generation, shards=tuple(new), tombstoned=n_tombstoned, tombstoned_docs=per_doc,
                  new_doc_ids=n_new, already=already)
