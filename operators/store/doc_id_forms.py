"""A document id as a user types it and as the index stores it may differ in Unicode form: a file named on macOS
(``café.txt`` as ``cafe`` + U+0301, NFD) gives an NFD id, while a keyboard gives NFC. Stored ids are never changed
(``--sync`` matches them against file names), so a lookup by a user's id tries the id given, then its other forms."""

from __future__ import annotations

import unicodedata
from typing import Callable

from operators.store.errors import IndexStoreError


class AmbiguousDocIdError(IndexStoreError):
    """Two stored ids differ only in Unicode form, and the user's id was neither exactly."""


def other_forms(doc_id: str) -> list[str]:
    """The NFC and NFD forms of ``doc_id`` that differ from it (none for ASCII)."""
    return [form for form in dict.fromkeys(unicodedata.normalize(f, doc_id) for f in ("NFC", "NFD"))
            if form != doc_id]


def stored_doc_id(doc_id: str, stored: Callable[[str], bool]) -> str:
    """The id the index stores for ``doc_id``: itself where ``stored`` says so, else its one other form that is
    stored (``doc_id`` when none is); an ``AmbiguousDocIdError`` when both of its other forms are."""
    if stored(doc_id):
        return doc_id
    found = [form for form in other_forms(doc_id) if stored(form)]
    if len(found) > 1:
        raise AmbiguousDocIdError(f"the doc id {doc_id!r} is stored in two Unicode forms ({found[0]!r}, NFC, and "
                                  f"{found[1]!r}, NFD): give the one you mean exactly, as `index documents` lists it",
                                  field="doc_id")
    return found[0] if found else doc_id
