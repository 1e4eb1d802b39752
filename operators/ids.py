"""Document ids from content, for sources without an id field and for the chunker and dedup.

Sources and preprocessing both need them, so they live here rather than in either category.

``content_doc_id`` is the one definition of a content id in Tessera: the first 12
hex characters of the MD5 of the title followed by the first 100 characters of the
text. The same document therefore gets the same id from every source (GRPO prompts,
a JSONL file without ``_id``, the chunker's input), so runs can be joined on it.

``content_key`` is different on purpose: a hash of the *whole* normalised title and
text, for deciding whether two documents are duplicates. The 100-character id would
merge documents that only share their opening.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Iterable

import pyarrow as pa

_SPACES = re.compile(r"\s+")


def content_doc_id(title: str | None, text: str | None) -> str:
    """``md5(title + text[:100])``, first 12 hex characters; ``None`` counts as ``""``."""
    payload = (title or "") + (text or "")[:100]
    return hashlib.md5(payload.encode("utf-8")).hexdigest()[:12]


def content_doc_ids(titles: Iterable[str | None] | None, texts: Iterable[str | None]) -> list[str]:
    """``content_doc_id`` of every row; ``titles=None`` means no title column."""
    texts = list(texts)
    titles = [None] * len(texts) if titles is None else list(titles)
    return [content_doc_id(title, text) for title, text in zip(titles, texts)]


def normalise(text: str | None) -> str:
    """NFKC, case-folded, whitespace runs collapsed to one space, trimmed."""
    return _SPACES.sub(" ", unicodedata.normalize("NFKC", text or "").casefold()).strip()


def content_key(title: str | None, text: str | None) -> str:
    """Full MD5 of the normalised title and text: equal for duplicate documents."""
    payload = normalise(title) + "\x00" + normalise(text)
    return hashlib.md5(payload.encode("utf-8")).hexdigest()


def fill_missing_ids(ids: pa.Array | pa.ChunkedArray | None, titles, texts) -> pa.Array:
    """``ids`` as strings, with content ids where an id is null or there is no id column. The texts are read into
    Python only then: a chunker's 50 MB text was copied for ids it already had."""
    if ids is not None:
        ids = ids.cast(pa.string())
        if ids.null_count == 0:
            return ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    text_values = texts.to_pylist() if isinstance(texts, (pa.Array, pa.ChunkedArray)) else list(texts)
    title_values = titles.to_pylist() if isinstance(titles, (pa.Array, pa.ChunkedArray)) else titles
    if ids is None:
        return pa.array(content_doc_ids(title_values, text_values), pa.string())
    title_values = title_values if title_values is not None else [None] * len(text_values)
    return pa.array(
        [i if i is not None else content_doc_id(t, x) for i, t, x in zip(ids.to_pylist(), title_values, text_values)],
        pa.string(),
    )
