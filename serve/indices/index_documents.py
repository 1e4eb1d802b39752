"""One document of an index with its passages' text (``GET /v1/indices/{name}/documents/{id}``): what a user uploaded,
as the doc store holds it.

The listing (``operators.store.listing``) reads a few small columns of every passage; the text is the bulk of a doc
store, so ``Index.passages_of`` reads the ``doc_id`` column of each shard first, and the other columns only of the
shard that holds the document (a document lives in one shard: replacing it tombstones the old passages). Tombstoned
passages are left out, so a deleted document is not found.
"""

from __future__ import annotations

from typing import Any

from operators.errors import one_line
from operators.store.errors import passage_hint
from serve.http.errors import ApiError


def _stored_form(doc_id: str, stored: Any) -> str:
    """The id as the index stores it, in whichever Unicode form (``operators.store.doc_id_forms``); a 409 naming
    ``id`` when it stores two forms and ``doc_id`` is neither."""
    from operators.store.doc_id_forms import AmbiguousDocIdError, stored_doc_id

    try:
        return stored_doc_id(doc_id, stored)
    except AmbiguousDocIdError as err:
        raise ApiError(409, f"id: {err.message}", param="id", code="ambiguous_id") from None


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
        columns, read = ["docno", "title", "text", "chunk_index", *metadata], {}
        doc_id = _stored_form(doc_id, lambda form: bool(read.setdefault(form, index.passages_of(form, columns))))
        rows = read[doc_id]
    if not rows:
        hint = passage_hint([doc_id], index.live_doc_ids()) if index is not None else ""
        raise ApiError(404, f"index '{name}' has no document with the id '{one_line(doc_id, 60)}'{hint}", param="id",
                       code="document_not_found")
    rows.sort(key=lambda row: (row.get("chunk_index") is None, row.get("chunk_index") or 0))
    first = rows[0]
    return {"index": name, "id": doc_id, "title": first.get("title") or "",
            "metadata": {k: first[k] for k in metadata if first.get(k) is not None},
            "passages": [{"docno": str(row["docno"]), "text": row.get("text") or ""} for row in rows]}
