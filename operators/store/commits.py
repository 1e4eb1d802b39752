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
from operators.store.errors import ColumnTypeConflictError, CommitError, IndexCorruptError
from operators.store.layout import SHARDS, file_lock, read_manifest
from operators.store.settings import Manifest, ShardInfo

#: (docnos, doc_ids) of a shard, as object arrays.
ShardIds = Callable[[ShardInfo], tuple[np.ndarray, np.ndarray]]
#: The doc-store schema of a shard.
ShardSchema = Callable[[ShardInfo], pa.Schema]
#: The values of one doc-store column of a shard (every row).
ShardColumn = Callable[[ShardInfo, str], pa.ChunkedArray]
#: The values of one doc-store column of a shard, by shard id (the rows a reader reads).
ColumnValues = Callable[[str, str], pa.ChunkedArray]


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


def check_types(kept: Sequence[tuple[str, pa.Schema]], new: Sequence[tuple[str, pa.Schema]], path: Path) -> None:
    """Refuse a new shard with a doc-store column whose type cannot merge with the same column of a kept or
    other new shard. Mergeable is what pyarrow's permissive promotion merges (the doc store's concat): equal
    types, a null-typed column with any, integers and floats with each other (widened), string with
    large_string. Anything else (``year`` int64 in one batch, string in the next) would make every search that
    reads rows of both shards fail, so the commit that brings it in is refused, naming the column and each shard
    that holds a type it clashes with (that shard's own type: int64 and double merge to a double no shard has)."""
    columns = _ColumnTypes()
    for shard_id, schema in kept:
        for field in schema:  # an index that already holds a conflict (made before this check): the first type stays
            columns.add(shard_id, field)
    for shard_id, schema in new:
        for field in schema:
            if not columns.add(shard_id, field):
                raise CommitError(f"shard {shard_id!r}: column {field.name!r} is {field.type}, but it is "
                                  f"{columns.clashing(field)} of {path}; the index's documents must agree on each "
                                  f"metadata column's type: convert the column to {columns.merged[field.name]} (or "
                                  "delete the documents with the other type and compact)", field=field.name)


def check_values(kept: Sequence[tuple[str, pa.Schema]], new: Sequence[tuple[str, pa.Schema]], values: ColumnValues,
                 path: Path) -> None:
    """Refuse new shards whose column types merge (``check_types`` passed) to a type that cannot hold every live
    value: pyarrow's permissive promotion merges int64 and uint64 to int64 and an integer with a double to double,
    and reading rows of both shards into one table casts each to that type, which fails on a uint64 beyond
    2**63-1 or an integer beyond 2**53 (Arrow refuses to change a value). A new shard's values are checked where its
    type is not the merged one; a kept shard's only when this commit changes the type its column merges to (a
    commit before checked it against the old one)."""
    before, after = _ColumnTypes(), _ColumnTypes()
    for shard_id, schema in kept:
        for field in schema:
            before.add(shard_id, field)
            after.add(shard_id, field)
    for shard_id, schema in new:
        for field in schema:
            after.add(shard_id, field)
    suspects = [(shard_id, field, True) for shard_id, schema in new for field in schema]
    # a kept shard's only where this commit changes the type its column merges to; a kept type that does not merge
    # at all is a conflict older than the type check (named when read), not this commit's
    suspects += [(shard_id, field, False) for shard_id, schema in kept for field in schema
                 if before.merged[field.name] != after.merged[field.name]
                 and _mergeable(field.type, after.merged[field.name])]
    for shard_id, field, is_new in suspects:
        merged = after.merged[field.name]
        reason = None if field.type == merged else unfit(values(shard_id, field.name), merged)
        if reason is None:
            continue
        mine = (shard_id, field) if is_new else next(  # the new shard whose type changed the merge
            (s, schema.field(field.name)) for s, schema in new
            if field.name in schema.names and schema.field(field.name).type != before.merged[field.name])
        advice = (f"keep its values within what {merged} holds, or give them a metadata column of another name"
                  if is_new else f"convert the new documents' values to {field.type}, the type of shard "
                  f"{shard_id!r}, or give them a metadata column of another name")
        raise CommitError(f"shard {mine[0]!r}: column {field.name!r} is {mine[1].type}, and "
                          f"{after.others(field.name, mine[1].type)} of {path}; these merge to {merged}, which cannot "
                          f"hold every value of shard {shard_id!r} ({reason}), so no search could read rows of both: "
                          f"nothing was added; {advice}", field=field.name)


def type_conflict_error(path: Path, schemas: Sequence[tuple[str, pa.Schema]],
                        values: ColumnValues | None = None) -> ColumnTypeConflictError | None:
    """The error naming the first doc-store column whose types in ``schemas`` ((shard id, schema), shards with live
    rows) do not merge, with the shards holding each type and how to repair it; with ``values`` (the rows read of
    each shard's column), also the first whose types merge to one that cannot hold a shard's values (int64 and a
    uint64 beyond 2**63-1); None when they all merge. For a reader whose concat of shard rows failed: an index
    written before commits checked types and values."""
    columns = _ColumnTypes()
    repair = ("so their rows cannot be read into one table: delete the documents of one type (tessera index delete) "
              "and compact (tessera index compact) to repair it (docs/indices.md)")
    for shard_id, schema in schemas:
        for field in schema:
            if not columns.add(shard_id, field):
                return ColumnTypeConflictError(
                    path, f"column {field.name!r} is {field.type} in shard {shard_id!r} but {columns.clashing(field)} "
                    f"(shards committed before commits checked metadata types), {repair}", field=field.name)
    for shard_id, schema in schemas if values is not None else ():
        for field in schema:
            merged = columns.merged[field.name]
            reason = None if field.type == merged else unfit(values(shard_id, field.name), merged)
            if reason is not None:
                return ColumnTypeConflictError(
                    path, f"column {field.name!r} is {field.type} in shard {shard_id!r} and "
                    f"{columns.others(field.name, field.type)}; these merge to {merged}, which cannot hold every "
                    f"value of shard {shard_id!r} ({reason}; shards committed before commits checked that values "
                    f"fit), {repair.replace('of one type', f'whose {field.name!r} does not fit {merged}')}",
                    field=field.name)
    return None


def live_values(path: Path, manifest: Manifest) -> ColumnValues:
    """The live values of a column of a shard of ``manifest``, read from its file (``type_conflict_error``)."""
    infos = {info.id: info for info in manifest.shards}

    def read(shard_id: str, name: str) -> pa.ChunkedArray:
        info = infos[shard_id]
        values = shard_io.read_docs(path / SHARDS / shard_id, [name]).column(name)
        return values.filter(pa.array(shard_io.live_mask(manifest, shard_id, info.n_chunks)))

    return read


def unfit(values: pa.Array | pa.ChunkedArray, kind: pa.DataType) -> str | None:
    """Arrow's reason why ``values`` do not all cast to ``kind`` without a change (as reading them into one table
    with rows of that type casts them); None when they do (also what an upload is checked by before it is queued:
    ``serve.index_reading``)."""
    try:
        values.cast(kind, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as err:
        return (str(err).strip().splitlines() or [type(err).__name__])[0]
    return None


def live_schemas(path: Path, manifest: Manifest) -> list[tuple[str, pa.Schema]]:
    """(shard id, doc-store schema) of each shard of ``manifest`` with a live row (a listing leaves the others out),
    read from the files' footers alone."""
    return [(info.id, shard_io.docs_schema(path / SHARDS / info.id)) for info in manifest.shards
            if len(manifest.tombstones.get(info.id, ())) < info.n_chunks]


class _ColumnTypes:
    """Each doc-store column's types across shards: every type with the first shard that holds it, and the type
    they all merge to."""

    def __init__(self) -> None:
        self.holders: dict[str, dict[pa.DataType, str]] = {}
        self.merged: dict[str, pa.DataType] = {}

    def add(self, shard_id: str, field: pa.Field) -> bool:
        """Record ``field`` of shard ``shard_id``; False (nothing recorded) when its type does not merge."""
        types = self.holders.setdefault(field.name, {})
        if types:
            try:
                unified = _merged_type(self.merged[field.name], field.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                return False
        else:
            unified = field.type
        types.setdefault(field.type, shard_id)
        self.merged[field.name] = unified
        return True

    def clashing(self, field: pa.Field) -> str:
        """The recorded types of ``field``'s column that do not merge with its type (all of them when only their
        merge does not), each with the first shard holding it: "int64 in shard 'A' and double in shard 'B'"."""
        types = self.holders[field.name]
        clashing = {kind: owner for kind, owner in types.items() if not _mergeable(kind, field.type)} or types
        return " and ".join(f"{kind} in shard {owner!r}" for kind, owner in clashing.items())

    def others(self, name: str, kind: pa.DataType) -> str:
        """The recorded types of column ``name`` other than ``kind``, each with the first shard holding it."""
        return " and ".join(f"{other} in shard {owner!r}" for other, owner in self.holders[name].items()
                            if other != kind)


def merged_schema(schemas: Sequence[pa.Schema]) -> pa.Schema:
    """The columns of all ``schemas``, each with the type its types merge to (``check_types``'s rule); a column
    whose types do not merge (an index made before commits refused that) keeps its first type."""
    columns = _ColumnTypes()
    for schema in schemas:
        for field in schema:
            columns.add("", field)
    return pa.schema([pa.field(name, kind) for name, kind in columns.merged.items()])


def _merged_type(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    """The type pyarrow's permissive promotion merges ``a`` and ``b`` to; raises when they do not merge."""
    return pa.unify_schemas([pa.schema([pa.field("c", a)]), pa.schema([pa.field("c", b)])],
                            promote_options="permissive").field("c").type


def _mergeable(a: pa.DataType, b: pa.DataType) -> bool:
    try:
        _merged_type(a, b)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return False
    return True


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
