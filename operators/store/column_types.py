"""Each doc-store column's type across an index's shards: a commit refuses a shard whose column types cannot
merge with the kept shards' (``check_types``) or merge to a type that cannot hold every live value
(``check_values``); a reader of an index made before these checks names the conflict it meets
(``type_conflict_error``); and the schema the shards' columns merge to (``merged_schema``). Apart from
``commits`` (what one commit changes in the manifest), which re-exports these names."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

import pyarrow as pa

from operators.errors import see_docs
from operators.store import shard as shard_io
from operators.store.errors import ColumnTypeConflictError, CommitError
from operators.store.layout import SHARDS
from operators.store.settings import Manifest

#: The values of one doc-store column of a shard, by shard id (the rows a reader reads).
ColumnValues = Callable[[str, str], pa.ChunkedArray]


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
              f"and compact (tessera index compact) to repair it; see {see_docs('indices')}")
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
    ``serve.indices.index_reading``)."""
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
