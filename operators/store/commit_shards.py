"""Which written shards one commit records: ``Index._commit``'s work while it holds the index's lock.

Why apart from ``operators.store.index``: this is the part of a commit that decides, from the manifest
as it is now and the shard folders on disk, what the commit changes (``commits.apply`` then records the
shards and tombstones), with what it reads of each shard kept per shard version (``ShardReads``). The
index keeps what only it can do: take its locks, read and write the manifest, and remember the new one.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pyarrow as pa

from operators.store import commits, shard as shard_io
from operators.store.commits import Commit
from operators.store.errors import CommitConflictError, CommitError
from operators.store.layout import SHARDS
from operators.store.settings import Manifest, ShardInfo


class ShardReads:
    """What commits read of each written shard, read once per shard version (id and token): its docnos and doc
    ids (for tombstones and clashes), its doc-store schema (for the column type check)."""

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


def record(manifest: Manifest, infos: Sequence[ShardInfo], reads: ShardReads, *, path: Path, replace: set[str],
           drop_docnos: set[str], remove_shards: Sequence[str], expected_generation: int | None,
           refuse_live_doc_ids: bool = False) -> Commit:
    """One commit of ``infos`` into ``manifest`` (read under the index's lock, written back by the caller,
    ``Index._commit``), with the tombstones of ``commits.apply``; returns what it did.

    The shards' files on disk are the truth: a retried write of the same id may have replaced them, and a
    shard committed before with the same token is not recorded again. ``Commit.already`` names the shards the
    manifest listed before this commit, so a caller does not count another writer's commit as its own. With
    ``expected_generation``, a manifest that another commit changed meanwhile is a ``CommitConflictError``
    (``Index.compact`` redoes)."""
    if expected_generation is not None and manifest.generation != expected_generation:
        raise CommitConflictError(f"index {path} changed (generation {expected_generation} -> "
                                  f"{manifest.generation}) while this commit was prepared; retry")
    committed = {s.id: s for s in manifest.shards}
    new: list[ShardInfo] = []
    for info in infos:
        on_disk = shard_io.read_info(path / SHARDS / info.id)
        if on_disk is None:
            raise CommitError(f"shard {info.id!r} was not written (no {SHARDS}/{info.id}/"
                              f"{shard_io.INFO_FILE} in {path})", field="shard_id")
        if info.id in committed and committed[info.id].token == on_disk.token:
            continue
        new.append(on_disk)  # a committed id whose folder a later write replaced: recorded as it is on disk now
    already = tuple(info.id for info in infos if info.id in committed)
    n_tombstoned, n_new = commits.apply(manifest, new, reads.ids, path=path, replace=replace, drop_docnos=drop_docnos,
                                        remove_shards=remove_shards, schema=reads.schema,
                                        refuse_live_doc_ids=refuse_live_doc_ids)
    for shard_id in remove_shards:  # superseded: their grace before remove_uncommitted starts now
        try:
            os.utime(path / SHARDS / shard_id)
        except FileNotFoundError:
            pass
    return Commit(generation=manifest.generation, shards=tuple(new), tombstoned=n_tombstoned, new_doc_ids=n_new,
                  already=already)
