"""What an index holds, by document: the listing behind ``tessera index documents`` and ``GET
/v1/indices/{name}/documents``."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

#: Doc-store columns of every passage; the others are a document's metadata.
PASSAGE_COLUMNS = frozenset({"docno", "doc_id", "title", "text", "vector", "chunk_index", "total_chunks"})


def document_page(index: Any, offset: int, limit: int) -> dict[str, Any]:
    """``limit`` documents of ``index`` from ``offset``, in the order they were added (the order of the shards),
    each with its title, passage count and metadata (its first passage's), and how many there are in all."""
    metadata = [c for c in index.column_names() if c not in PASSAGE_COLUMNS and not c.startswith("_")]
    try:
        _, table = index.columns(["doc_id", "title", *metadata])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as err:  # an index made before commits checked column types
        from operators.store.commits import live_schemas, live_values, type_conflict_error

        manifest = index.manifest
        raise type_conflict_error(index.path, live_schemas(index.path, manifest), live_values(index.path, manifest)) \
            or err
    doc_ids = table.column("doc_id").cast(pa.string())
    passages: dict[str, int] = {}
    for doc_id in doc_ids.to_pylist():
        passages[doc_id] = passages.get(doc_id, 0) + 1
    shown = list(passages)[offset:offset + limit]
    first: dict[str, dict[str, Any]] = {}
    for row in table.filter(pc.is_in(doc_ids, value_set=pa.array(shown, pa.string()))).to_pylist():
        first.setdefault(str(row["doc_id"]), row)
    return {"total": len(passages), "documents": [
        {"id": doc_id, "title": first[doc_id]["title"] or "", "passages": passages[doc_id],
         "metadata": {k: first[doc_id][k] for k in metadata if first[doc_id][k] is not None}} for doc_id in shown]}
