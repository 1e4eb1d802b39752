"""Title links: the indexed documents a text names, found by their titles (``retrieve.multi_hop``'s ``links``).

A Wikipedia paragraph links the articles it names; a corpus of plain paragraphs has lost
the markup but not the names. Looking every word n-gram of a text up in a dictionary of
the index's titles finds those links without a search, so a bridge document that shares
no other words with the question or the seed is still found. The dictionary is built once
per index generation and process (one pass over the doc store's ``title`` column; memory
grows with the number of distinct titles).

Usage::

    links = title_links(index)
    links.find("Kiss and Tell is a 1945 film starring Shirley Temple.")  # ['hp000001', ...]
"""

from __future__ import annotations

import re
import threading
from collections import defaultdict
from typing import Sequence

_WORD = re.compile(r"\w+")
_QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")  # "Kiss and Tell (1945 film)" is named as "Kiss and Tell"
#: Longest title, in words, that is looked up (longer titles are rarely quoted whole).
MAX_NAME_WORDS = 10

_lock = threading.Lock()
_cache: dict[str, tuple[int, "TitleLinks"]] = {}  # index path -> (generation, links)


def name_of(title: str | None) -> tuple[str, ...]:
    """A title as the words that name it: lower case, without a trailing parenthesis."""
    return tuple(_WORD.findall(_QUALIFIER.sub("", title or "").lower()))


def _is_name(words: tuple[str, ...]) -> bool:
    """Whether a title can stand for a link: a few letters at least, not a bare number ("1945")."""
    return 0 < len(words) <= MAX_NAME_WORDS and len("".join(words)) >= 3 and not all(w.isdigit() for w in words)


class TitleLinks:
    """The titles of one index generation, each naming the first chunk of its documents."""

    def __init__(self, docnos: Sequence[str], doc_ids: Sequence[str | None], titles: Sequence[str | None]) -> None:
        self._docs: dict[tuple[str, ...], list[str]] = defaultdict(list)
        seen: set[str] = set()
        for docno, doc_id, title in zip(docnos, doc_ids, titles):
            words = name_of(title)
            if _is_name(words) and (doc_id or docno) not in seen:
                seen.add(doc_id or docno)
                self._docs[words].append(docno)
        self._longest = max(map(len, self._docs), default=0)

    def find(self, text: str | None) -> list[str]:
        """Docnos of the documents whose title ``text`` names, in order of first mention. Names are matched
        leftmost-longest, as a link covers its words: "Shirley Temple" does not also link "Temple"."""
        words = _WORD.findall((text or "").lower())
        found: dict[str, None] = {}
        start = 0
        while start < len(words):
            end = next((end for end in range(min(len(words), start + self._longest), start, -1)
                        if tuple(words[start:end]) in self._docs), None)
            for docno in self._docs.get(tuple(words[start:end]), ()) if end else ():
                found.setdefault(docno)
            start = end or start + 1
        return list(found)


def title_links(index) -> TitleLinks:
    """The ``TitleLinks`` of ``index``'s current generation (built on first use, then shared)."""
    key = str(index.path)
    with _lock:
        generation, links = _cache.get(key, (None, None))
        if links is None or generation != index.generation:
            present = index.documents([]).schema.names
            generation, table = index.columns([c for c in ("docno", "doc_id", "title") if c in present])
            columns = [table.column(c).to_pylist() if c in table.column_names else [None] * table.num_rows
                       for c in ("docno", "doc_id", "title")]
            links = TitleLinks(*columns)
            _cache[key] = (generation, links)
        return links
