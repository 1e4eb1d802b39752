"""Reading an index the service holds (``serve.indices.indices``): its size for the listing, its live ids, what an
upload is refused for by the index (its ids already there, a metadata value its column cannot take), and a read that
meets an index deleted meanwhile, which is a 404 rather than the 500 of a damaged index."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa

from serve.http.errors import ApiError

#: How many ids a ``documents_exist`` refusal names in its message, and lists in its body.
SHOWN_IDS, LISTED_IDS = 10, 1000


@contextlib.contextmanager
def deleted_meanwhile(path: Path, name: str, field: str = "name") -> Iterator[None]:
    """Reading or changing the index at ``path``: when it fails (a shard file, the lock, the manifest not found) and
    the index has no manifest any more, it was deleted meanwhile (``DELETE /v1/indices/{name}`` moves the folder
    aside at once), and that is a 404 naming it, not the 500 of a damaged index."""
    from operators.store.errors import IndexStoreError

    try:
        yield
    except (IndexStoreError, OSError):
        if not was_deleted(path):
            raise
        raise ApiError(404, f"no index named '{name}': it was deleted while this request read it", param=field,
                       code="index_not_found") from None


def was_deleted(path: Path) -> bool:
    """Whether the index at ``path``, which a read just failed on, is gone rather than damaged: a delete moves the
    whole folder aside at once, so a missing manifest means deleted, while a present one means the failure is real."""
    return not (path / "manifest.json").exists()


#: What ``listing`` says of an index that has no documents yet.
EMPTY = {"chunks": 0, "shards": 0, "bm25": None, "dense": None, "encoder": None}


def open_index(path: Path) -> Any:
    """The index at ``path``, or None when it has none (its first ingestion has not committed, or it was deleted)."""
    from operators.store import Index, IndexNotFoundError

    try:
        return Index.open(path, verify=False)
    except IndexNotFoundError:
        return None


def describe(path: Path) -> dict[str, Any] | None:
    """Size and settings of the index at ``path``; None when there is none (or it cannot be read)."""
    from operators.store import Index
    from operators.store.errors import IndexStoreError

    try:
        index = Index.open(path, verify=False)
    except (IndexStoreError, OSError):
        return None
    settings, counts = index.settings, index.counts()
    return {"chunks": counts["live_chunks"], "shards": counts["shards"], "bm25": settings.bm25,
            "dense": settings.dense, "encoder": settings.encoder if settings.dense else None}


def live_doc_ids(index: Any) -> set[str]:
    """The ids of the documents that have a live passage in ``index``."""
    _, live = index.columns(["doc_id"])
    return set(live.column("doc_id").cast("string").to_pylist())


def stored_forms(ids: list[str], present: set[str]) -> dict[str, str]:
    """Each id given (once) and the id ``present`` holds for it in whichever Unicode form
    (``operators.store.doc_id_forms``); a 409 naming ``ids`` for one held in two forms, neither the one given."""
    from operators.store.doc_id_forms import AmbiguousDocIdError, stored_doc_id

    try:
        return {i: stored_doc_id(i, present.__contains__) for i in dict.fromkeys(ids)}
    except AmbiguousDocIdError as err:
        raise ApiError(409, f"ids: {err.message}", param="ids", code="ambiguous_id") from None


def refuse_against_index(path: Path, documents: list[Any], replace: bool, from_files: bool, max_keys: int) -> None:
    """What an upload is refused for by the index it adds to, before anything is written or queued: ids already in
    it (409, unless ``replace``: ``refuse_present_ids``), then metadata keys past ``max_keys`` (``refuse_many_keys``)
    and a metadata value whose type the index's column does not merge with (422: ``refuse_clashing_types``), which
    its task's commit would refuse after the 202."""
    from operators.store import Index
    from operators.store.errors import IndexStoreError

    try:
        index = Index.open(path, verify=False)
        present = set() if replace else live_doc_ids(index)
        columns = column_types(index)
    except (IndexStoreError, OSError):
        if not was_deleted(path):
            raise
        return  # deleted since it was found: the upload makes the index anew, so nothing of it is in the way
    refuse_present_ids([d.id for d in documents], present)
    refuse_many_keys(documents, columns.names, max_keys, from_files)
    refuse_clashing_types(path.name, documents, columns, from_files)


def refuse_many_keys(documents: list[Any], columns: list[str], limit: int, from_files: bool) -> None:
    """422 where the documents' metadata keys and the index's (``columns``, its doc store's) would be more than
    ``limit`` together (``max_metadata_keys``): each key is a column of every shard, and a 1 MB upload of keys of
    its own made tens of thousands, which every later search and commit of the index read."""
    from operators.metadata_columns import RESERVED

    held = {c for c in columns if c not in RESERVED}
    new = list(dict.fromkeys(key for doc in documents for key in doc.metadata if key not in held))
    if len(held) + len(new) <= limit:
        return
    where = "files" if from_files else "documents"
    shown = ", ".join(new[:5]) + (", ..." if len(new) > 5 else "")
    index = f" beside the index's {len(held)}" if held else ""
    raise ApiError(422, f"{where}: {len(new)} metadata key(s) of their own ({shown}){index} are "
                   f"{len(held) + len(new)}, over the limit max_metadata_keys={limit}: each is a column of the "
                   "index; keep the keys that filters read", param=where, code="max_metadata_keys")


def column_types(index: Any) -> pa.Schema:
    """The doc-store columns of every shard of ``index``, each with the type its shards merge to, read from the
    files' footers: what a commit merges a new shard's columns with (``operators.store.column_types.check_types``)."""
    from operators.store.commits import merged_schema
    from operators.store.layout import SHARDS
    from operators.store.shard import docs_schema

    return merged_schema([docs_schema(index.path / SHARDS / info.id) for info in index.manifest.shards])


def refuse_clashing_types(name: str, documents: list[Any], columns: pa.Schema, from_files: bool) -> None:
    """422 naming the first document whose metadata value the index's column of that name cannot take, as the
    upload's commit would refuse it (``check_types``, ``check_values``): its type does not merge with the column's
    (text where the index has numbers: ``'twenty twenty'`` for a double ``year``), or the type they merge to cannot
    hold it (an integer beyond 2**53 for a double). The upload's column is typed as its ingestion types it
    (``values_to_array``: integers beside a float are floats, mixed kinds text), each value alone to name one."""
    from flows.ingestion.column_types import merged_type as _merged
    from operators.sources._common import values_to_array
    from operators.store.commits import unfit

    for key in dict.fromkeys(key for doc in documents for key in doc.metadata if key in columns.names):
        values = [doc.metadata.get(key) for doc in documents]
        column, have = values_to_array(values), columns.field(key).type
        merged = _merged(have, column.type)  # None: they do not merge
        if merged is not None and (merged == column.type or unfit(column, merged) is None):
            continue

        def refused(value: Any) -> bool:  # this value alone: of a type that does not merge, or does not fit
            alone = values_to_array([value])
            return _merged(have, alone.type) is None if merged is None else unfit(alone, merged) is not None

        given = [i for i, value in enumerate(values) if value is not None]
        i = next((i for i in given if refused(values[i])), given[0])  # (mixed kinds made text: the first value)
        doc, kind = documents[i], values_to_array([values[i]]).type
        where = f"documents.{i} ('{doc.id}')" if not from_files else (  # a CSV row's document names no file
            f"{doc.metadata['path']}: document '{doc.id}'" if "path" in doc.metadata else f"document '{doc.id}'")
        clash = "these do not merge" if merged is None else f"these merge to {merged}, which cannot hold it"
        raise ApiError(422, f"{where}: metadata '{key}' is {kind} ({_json(values[i])}), but index '{name}' holds "
                       f"column '{key}' as {have}; {clash}. An index's documents must agree on each metadata column's "
                       f"type (integers and floats merge, to a float column): send it as {have}, or under another "
                       "metadata name; nothing was queued", param="files" if from_files else
                       f"documents.{i}.metadata.{key}", code="metadata_type_conflict")


def mixed_kind_warnings(documents: list[Any]) -> list[str]:
    """For each metadata name whose values in this upload are of kinds that no one column type holds (numbers and
    text, true/false and numbers): a warning that its column is text (``values_to_array``), said to the client, who
    would otherwise learn it only when a filter ``year >= 2000`` compares text. Integers and floats merge (to floats)
    and lists and objects are text anyway (as documented): neither is warned of."""
    from operators.json_tree import json_kind
    from operators.sources._common import values_to_array

    said = []
    for key in dict.fromkeys(key for doc in documents for key in doc.metadata):
        given = [(i, value) for i, doc in enumerate(documents) if (value := doc.metadata.get(key)) is not None]
        first: dict[str, tuple[int, Any]] = {}
        for i, value in given:
            first.setdefault(json_kind(value), (i, value))
        if len(first) < 2 or not set(first) <= {"a number", "a string", "true/false"}:
            continue
        if not pa.types.is_string(values_to_array([value for _, value in given]).type):
            continue
        examples = ", ".join(f"{kind} in '{documents[i].id}' ({_json(value)})" for kind, (i, value) in first.items())
        written = _json((first.get("a number") or first.get("true/false"))[1])  # one of this upload's, as text
        said.append(f"metadata '{key}' holds {examples}: its column is text, every value as written ('{written}' for "
                    f"{written}), and a filter on it compares text; send one kind to keep numbers as numbers")
    return said


def _json(value: Any) -> str:
    """A value as the client sent it, in JSON (true, not Python's True)."""
    import json

    return json.dumps(value, ensure_ascii=False, default=str)


def refuse_present_ids(ids: list[str], present: set[str]) -> None:
    """409 when any of ``ids`` is a document of the index already (``present``; replacing is a delete, then an add);
    its body lists them in ``ids`` (the first ``LISTED_IDS``) and counts them in ``ids_total``, for a client to act
    on."""
    taken = [i for i in ids if i in present]
    if taken:
        shown = ", ".join(f"'{i}'" for i in taken[:SHOWN_IDS]) + (" ..." if len(taken) > SHOWN_IDS else "")
        raise ApiError(409, f"{len(taken)} document id(s) are in the index already: {shown}; send them with "
                       "replace: true to replace them", param="documents", code="documents_exist",
                       extra={"ids": taken[:LISTED_IDS], "ids_total": len(taken)})
