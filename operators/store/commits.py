"""What one commit changes in the manifest, and the shard folders no commit will ever record.

``Index.commit`` is the one point that changes what is searchable, and ``Commit`` is
what it did, counted inside the commit itself. Counts read before and after it would
also count another process's commit that landed in between (a delete during an update
made the update report the delete's chunks as its own).

A shard folder that no manifest lists is invisible to readers, but it still takes disk
space. A writer whose commit fails removes the shards it wrote (``discard``). This runs
under the lock, and only for folders the manifest does not list and that still hold this
writer's write. Writers that die before committing leave folders behind, and a compaction
leaves the shards it superseded (readers of the previous manifest may be loading them).
``uncommitted`` lists them and ``remove_uncommitted`` deletes them after a grace
period, so a shard that another writer is about to commit is never touched.

The column types a commit checks across shards (``check_types``, ``check_values``) are ``column_types``.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from dataclasses import dataclass, field as dc_field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa

from operators.stale_writes import lock_path
from operators.store import shard as shard_io
from operators.store.column_types import (ColumnValues, check_types, check_values,  # noqa: F401 (re-exported)
                                          live_schemas, live_values, merged_schema, type_conflict_error, unfit)
from operators.store.errors import CommitError, IndexCorruptError
from operators.store.layout import SHARDS, file_lock, read_manifest
from operators.store.settings import Manifest, ShardInfo

#: (docnos, doc_ids) of a shard, as object arrays.
ShardIds = Callable[[ShardInfo], tuple[np.ndarray, np.ndarray]]
#: The doc-store schema of a shard.
ShardSchema = Callable[[ShardInfo], pa.Schema]
#: The values of one doc-store column of a shard (every row).
ShardColumn = Callable[[ShardInfo, str], pa.ChunkedArray]


@dataclass(frozen=True)
class Commit:
    """What one commit did: the generation it wrote, the shards it recorded, the live chunks it tombstoned."""

    generation: int
    shards: tuple[ShardInfo, ...]  # recorded by this commit (a shard committed before is not recorded again)
    tombstoned: int                # chunks replaced or deleted by this commit, not by others
    #: Of ``tombstoned``, how many chunks each document lost (by doc id): what an ingest that replaces its own
    #: earlier copy of a document takes off the chunks it counted.
    tombstoned_docs: dict[str, int] = dc_field(default_factory=dict)
    new_doc_ids: int = 0           # of the doc ids an upsert replaces, those that had no live chunk (inserted)
    #: Ids of the shards asked for that were committed already (listed, or merged by a compaction since): another
    #: commit recorded them first (two ingests of the same source write the same shard ids), so they are not this
    #: commit's work.
    already: tuple[str, ...] = ()


def live_refusal(shard_id: str, doc_ids: Iterable[Any], path: Path, field: str) -> CommitError:
    """The refusal of shard ``shard_id``, whose documents ``doc_ids`` are live in the index at ``path`` already."""
    clash = list(dict.fromkeys(str(d) for d in doc_ids))
    return CommitError(f"shard {shard_id!r}: document(s) {clash[:5]} ({len(clash)} in all) are already live in "
                       f"{path}", field=field, advice="replace them with `tessera index update FILE` or `tessera "
                       "ingest --replace` (in Python, Index.upsert)")


def apply(manifest: Manifest, new: list[ShardInfo], shard_ids: ShardIds, *, path: Path, replace: set[str],
          drop_docnos: set[str], remove_shards: Sequence[str], schema: ShardSchema | None = None,
          column: ShardColumn | None = None,
          refuse_live_doc_ids: bool | Callable[[str], bool] = False) -> tuple[int, int, dict[str, int]]:
    """Record ``new`` and the tombstones in ``manifest`` (in place); returns (chunks tombstoned, doc ids of
    ``replace`` that had no live chunk, i.e. new documents, and the chunks tombstoned per doc id).

    ``replace``: doc ids whose live chunks in other shards are tombstoned; ``drop_docnos``: chunks
    tombstoned; ``remove_shards``: shards dropped with their tombstones. A new shard whose docno is
    live elsewhere is refused, and with ``refuse_live_doc_ids`` one whose doc id is: an ingested index's docnos
    are ``ID#0``..., an added document's docno is its id. True (``Index.add``) counts the doc ids of every shard,
    a predicate of a shard id those of the shards it names (an ingest leaves out its source's own). With ``schema``,
    a new shard whose doc-store column types cannot merge with the kept shards' is refused (``check_types``), and
    with ``column`` too, one whose merge cannot hold every live value of both (``check_values``)."""
    new_ids = {s.id for s in new}
    if len(new_ids) != len(new):
        raise CommitError("the same shard id is committed twice in one commit")
    tombstones = {k: set(v) for k, v in manifest.tombstones.items() if k not in new_ids and k not in remove_shards}
    old = [s for s in manifest.shards if s.id not in new_ids and s.id not in remove_shards]
    if schema is not None and new:
        check_types([(s.id, schema(s)) for s in old], [(s.id, schema(s)) for s in new], path)
    counts_doc_ids = (lambda shard_id: bool(refuse_live_doc_ids)) if isinstance(refuse_live_doc_ids, bool) \
        else refuse_live_doc_ids
    n_tombstoned = 0
    live_docnos: set[str] = set()
    live_doc_ids: set[str] = set()
    per_doc: Counter[str] = Counter()
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
        per_doc.update(str(d) for d in doc_ids[rows].tolist())
        alive[rows] = False
        if new:
            live_docnos.update(docnos[alive].tolist())
            if counts_doc_ids(info.id):
                live_doc_ids.update(doc_ids[alive].tolist())
    for info in new:
        docnos, doc_ids = shard_ids(info)
        rows = [i for i, d in enumerate(docnos.tolist()) if d in live_docnos]
        kind = "docno"
        if not rows and refuse_live_doc_ids:
            rows, kind = [i for i, d in enumerate(doc_ids.tolist()) if d in live_doc_ids], "doc id"
        if rows and kind == "docno":
            _refuse_docnos_of_others(info.id, docnos[rows].tolist(), doc_ids[rows].tolist(), old, tombstones,
                                     shard_ids, path)
        if rows:  # named by their documents' ids: d2, not its passage's docno d2#0
            raise live_refusal(info.id, doc_ids[rows].tolist(), path, "docno" if kind == "docno" else "doc_id")
        live_docnos.update(docnos.tolist())
        live_doc_ids.update(doc_ids.tolist())
    if schema is not None and column is not None and new:  # after the tombstones: a replaced row's value is gone
        def live_values(info: ShardInfo, name: str) -> pa.ChunkedArray:
            values, dead = column(info, name), tombstones.get(info.id)
            if not dead:
                return values
            alive = np.ones(len(values), dtype=bool)
            alive[list(dead)] = False
            return values.filter(pa.array(alive))

        infos = {s.id: s for s in old + new}
        check_values([(s.id, schema(s)) for s in old], [(s.id, schema(s)) for s in new],
                     lambda shard_id, name: live_values(infos[shard_id], name), path)
    manifest.shards = old + new
    manifest.tombstones = {k: sorted(v) for k, v in tombstones.items() if v}
    manifest.generation += 1
    manifest.updated_at = time.time()
    return n_tombstoned, len(replace - set(per_doc)), dict(per_doc)


def _refuse_docnos_of_others(shard_id: str, docnos: list, doc_ids: list, old: Sequence[ShardInfo],
                             tombstones: dict[str, set[int]], shard_ids: ShardIds, path: Path) -> None:
    """Refuse, naming both, new passages whose docnos are live as another document's (``hh#0``, a document added
    with that id, against the first passage of the document ``hh``): ``--replace`` replaces a document by its id,
    so the refusal's advice to replace led nowhere."""
    wanted, owners = set(docnos), {}
    for info in old:
        live_docnos, live_ids = shard_ids(info)
        dead = tombstones.get(info.id, set())
        owners.update((str(d), str(i)) for row, (d, i) in enumerate(zip(live_docnos.tolist(), live_ids.tolist()))
                      if d in wanted and row not in dead)
    others = [(d, owners[str(d)], str(i)) for d, i in zip(docnos, doc_ids) if owners.get(str(d), str(i)) != str(i)]
    if others:
        shown = ", ".join(f"'{d}' of document '{i}' is document '{o}'" for d, o, i in others[:3])
        raise CommitError(f"shard {shard_id!r}: passage id(s) taken by other documents in {path} ({shown}; "
                          f"{len(others)} in all)", field="id",
                          advice="an ingested document's passages are ID#0, ID#1, ...: give these documents ids "
                                 "no other document's passages have, or delete those documents first")


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
    """Delete the uncommitted folders last changed more than ``older_than_s`` seconds ago, and at once the temporary
    folders whose writer's lock is free (``shard.remove_abandoned_writes``); returns their names."""
    removed = shard_io.remove_abandoned_writes(path / SHARDS)  # writers killed outright: at once, whatever age
    with file_lock(path):
        limit = time.time() - older_than_s
        for name in uncommitted(path, read_manifest(path)):
            folder = path / SHARDS / name
            if lock_path(folder).exists():  # a live writer's (the sweep above removed those whose lock was free)
                continue
            try:
                if folder.stat().st_mtime > limit:
                    continue
            except FileNotFoundError:
                continue
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(name)
    return removed
