"""What one commit changes in the manifest, and the shard folders no commit will ever record.

``Index.commit`` is the one point that changes what is searchable, and ``Commit`` is
what it did, counted inside the commit itself. Counts read before and after it would
also count another process's commit that landed in between (a delete during an update
made the update report the delete's chunks as its own).

A shard folder that no manifest lists is invisible to readers, but it still takes disk
space. A writer whose commit fails removes the shards it wrote (``discard``). This runs
under the lock, and only for folders the manifest does not list and that still hold this
writer's write. Writers that die before committing leave folders behind.
``uncommitted`` lists them and ``remove_uncommitted`` deletes them after a grace
period, so a shard that another writer is about to commit is never touched.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from operators.store import shard as shard_io
from operators.store.errors import CommitError, IndexCorruptError
from operators.store.layout import SHARDS, file_lock, read_manifest
from operators.store.settings import Manifest, ShardInfo

#: (docnos, doc_ids) of a shard, as object arrays.
ShardIds = Callable[[ShardInfo], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Commit:
    """What one commit did: the generation it wrote, the shards it recorded, the live chunks it tombstoned."""

    generation: int
    shards: tuple[ShardInfo, ...]  # recorded by this commit (a shard committed before is not recorded again)
    tombstoned: int                # chunks replaced or deleted by this commit, not by others


def apply(manifest: Manifest, new: list[ShardInfo], shard_ids: ShardIds, *, path: Path, replace: set[str],
          drop_docnos: set[str], remove_shards: Sequence[str]) -> int:
    """Record ``new`` and the tombstones in ``manifest`` (in place); returns the chunks tombstoned.

    ``replace``: doc ids whose live chunks in other shards are tombstoned; ``drop_docnos``: chunks
    tombstoned; ``remove_shards``: shards dropped with their tombstones. A new shard whose docno is
    live elsewhere is refused."""
    new_ids = {s.id for s in new}
    if len(new_ids) != len(new):
        raise CommitError("the same shard id is committed twice in one commit")
    tombstones = {k: set(v) for k, v in manifest.tombstones.items() if k not in new_ids and k not in remove_shards}
    old = [s for s in manifest.shards if s.id not in new_ids and s.id not in remove_shards]
    n_tombstoned = 0
    live_docnos: set[str] = set()
    for info in old:
        docnos, doc_ids = shard_ids(info)
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
        docnos, _ = shard_ids(info)
        clash = [d for d in docnos.tolist() if d in live_docnos]
        if clash:
            raise CommitError(f"shard {info.id!r}: docno(s) {clash[:5]} ({len(clash)} in all) are already "
                              f"live in {path}; replace them with Index.upsert (on the command line: `tessera index "
                              "update`, or `tessera ingest --replace`)", field="docno")
        live_docnos.update(docnos.tolist())
    manifest.shards = old + new
    manifest.tombstones = {k: sorted(v) for k, v in tombstones.items() if v}
    manifest.generation += 1
    manifest.updated_at = time.time()
    return n_tombstoned


def discard(path: Path, infos: Sequence[ShardInfo]) -> list[str]:
    """Remove the folders of ``infos``, shards written for a commit that failed; returns the ids removed.

    Under the lock, a folder is removed only when the manifest does not list its id and it still
    holds the write ``info`` describes (same token), so a committed shard, or another write of
    the same id, is never touched."""
    removed = []
    with file_lock(path):
        committed = {s.id for s in read_manifest(path).shards}
        for info in infos:
            folder = path / SHARDS / info.id
            try:
                on_disk = shard_io.read_info(folder)
            except IndexCorruptError:
                continue
            if info.id not in committed and on_disk is not None and on_disk.token == info.token:
                shutil.rmtree(folder, ignore_errors=True)
                removed.append(info.id)
    return removed


def uncommitted(path: Path, manifest: Manifest) -> list[str]:
    """Folders under ``shards/`` that ``manifest`` does not list: shards and temporary folders of writers
    that died before committing (or are about to commit)."""
    folder = path / SHARDS
    if not folder.is_dir():
        return []
    committed = {s.id for s in manifest.shards}
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and p.name not in committed)


def remove_uncommitted(path: Path, older_than_s: float) -> list[str]:
    """Delete the uncommitted folders last changed more than ``older_than_s`` seconds ago; returns their names."""
    removed = []
    with file_lock(path):
        limit = time.time() - older_than_s
        for name in uncommitted(path, read_manifest(path)):
            folder = path / SHARDS / name
            try:
                if folder.stat().st_mtime > limit:
                    continue
            except FileNotFoundError:
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(name)
    return removed
