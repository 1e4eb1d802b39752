"""Text that UTF-8 can carry: JSON allows a lone surrogate (``"\\ud83d"``), which no tokenizer, YAML file or
HTTP answer can take, so text from outside is checked where it comes in (request bodies, flow specs). Text with no
word to search for (``blank``: the service's queries and messages, ``tessera chat``'s lines). And text that BM25
tokenizes: one letter written two ways is one token."""

from __future__ import annotations

import unicodedata
from typing import Any

from operators.json_tree import first_place


def unicode_problem(text: str) -> str | None:
    """Why ``text`` is not valid Unicode text (None if it is): UTF-8 cannot encode a lone surrogate."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"holds a lone surrogate (\\u{ord(text[err.start]):04x}) at character {err.start}, which is not text"
    return None


def blank(text: str) -> bool:
    """Whether a query holds nothing to search for: only whitespace and control characters (a NUL, which
    ``str.strip`` keeps), no word to match: searched for, it would bring arbitrary documents, as a blank one would."""
    return all(char.isspace() or unicodedata.category(char) == "Cc" for char in text)


def first_broken_text(value: Any, where: str = "") -> tuple[str, str] | None:
    """The first string in ``value`` (a JSON-like tree, keys included) that is not valid Unicode, as ``(its
    dotted place, why)``, or None (``json_tree.first_place``)."""
    return first_place(value, lambda item: unicode_problem(item) if isinstance(item, str) else None, where)


def composed(text: str) -> str:
    """``text`` in Unicode's composed form (NFC): an accent typed as a letter and a combining mark (``e`` + U+0301,
    as macOS file names and some PDFs write it) is one letter, as in the precomposed ``é``. Without it, ``\\w``
    stopped at the mark: ``café`` so written was the token ``cafe``, which a query for ``café`` never found. NFC
    keeps every space where it was (NFKC would turn a no-break space into one, shifting ``pieces``' owners)."""
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)
