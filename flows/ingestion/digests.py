"""What staging compares of a finished shard's documents: a digest of their ids and texts (``docs_digest``: an edit
refuses the source, or with sync stages it again), and one of their titles and metadata (``meta_digest``)."""

from __future__ import annotations

import hashlib

import pyarrow as pa
import pyarrow.compute as pc

from flows.ingestion.column_types import as_text


def meta_digest(docs: pa.Table) -> str:
    """Hash of the shard's titles and metadata, each column's values as text (``column_types.as_text``, null as
    empty), so a column made text since (``column_types``) hashes the same, and one empty in every row as none."""
    h = hashlib.sha1()
    for name in sorted(n for n in docs.column_names if n not in ("docno", "text")):
        values = pc.fill_null(as_text(docs.column(name)), "").to_pylist()
        if any(values):
            h.update(f"{name}\x1e{chr(0x1f).join(values)}\x1e".encode("utf-8", "replace"))
    return h.hexdigest()[:16]


def docs_digest(docs: pa.Table) -> str:
    """Hash of the shard's ids and texts (what must not change under a finished shard)."""
    h = hashlib.sha1()
    for name in ("docno", "text"):
        if name in docs.column_names:
            for value in docs.column(name).to_pylist():
                h.update((value or "").encode("utf-8", "replace"))
                h.update(b"\x1f")
    return h.hexdigest()[:16]
