"""One document of an index with its passages' text (``GET /v1/indices/{name}/documents/{id}``): what a user uploaded,
as the doc store holds it.

The listing (``operators.store.listing``) reads a few small columns of every passage; the text is the bulk of a doc
store, so here the ``doc_id`` column of each shard is read first, and the other columns only of the shard that holds
the document (a document lives in one shard: replacing it tombstones the old passages). Tombstoned passages are left
out, so a deleted document is not found.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from serve.errors import ApiError


def document(index: Any, name: str, doc_id: str) -> dict[str, Any]:
    """Document ``doc_id`` of ``index`` (None: an index whose first ingestion has not committed): its title, its
    metadata (its first passage's, as the listing gives it) and its passages in order; a 404 naming ``id`` when no
    live passage has that id."""
    from operators.store.listing import PASSAGE_COLUMNS

    if not doc_id:
        raise ApiError(422, "id: give a document id (GET /v1/indices/{name}/documents lists them)", param="id",
                       code="invalid_value")
    rows, metadata = [], []
    if index is not None:
        metadata = [c for c in index.column_names() if c not in PASSAGE_COLUMNS and not c.startswith("_")]
        rows = _live_rows(index, doc_id, ["docno", "title", "text", "chunk_index", *metadata])
    if not rows:
        raise ApiError(404, f"index '{name}' has no document with the id '{doc_id}'", param="id",
                       code="document_not_found")
    rows.sort(key=lambda row: (row.get("chunk_index") is None, row.get("chunk_index") or 0))
    first = rows[0]
    return {"index": name, "id": doc_id, "title": first.get("title") or "",
            "metadata": {k: first[k] for k in metadata if first.get(k) is not None},
            "passages": [{"docno": str(row["docno"]), "text": row.get("text") or ""} for row in rows]}


def _live_rows(index: Any, doc_id: str, names: list[str]) -> list[dict[str, Any]]:
    """The doc-store rows (columns ``names``) of the live passages of ``doc_id``. A shard that a compaction removed
    while it was read is read again from the newer manifest, once (as ``Index.columns`` does)."""
    from operators.store.errors import IndexCorruptError

    manifest = index.manifest
    try:
        return _read(index, manifest, doc_id, names)
    except IndexCorruptError:
        if index.manifest.same_version(manifest):
            raise
        return _read(index, index.manifest, doc_id, names)


def _read(index: Any, manifest: Any, doc_id: str, names: list[str]) -> list[dict[str, Any]]:
    from operators.store.layout import SHARDS
    from operators.store.shard import live_mask, read_docs

    rows: list[dict[str, Any]] = []
    for info in manifest.shards:
        folder = index.path / SHARDS / info.id
        ids = read_docs(folder, ["doc_id"]).column("doc_id").cast(pa.string())
        live = pa.array(live_mask(manifest, info.id, len(ids)))
        mine = pc.and_(live, pc.fill_null(pc.equal(ids, pa.scalar(doc_id, pa.string())), False))
        if pc.any(mine).as_py():
            rows += read_docs(folder, names).filter(mine).to_pylist()
    return rows
