"""Text that UTF-8 can carry: JSON allows a lone surrogate (``"\\ud83d"``), which no tokenizer, YAML file or
HTTP answer can take, so text from outside is checked where it comes in (request bodies, flow specs)."""

from __future__ import annotations

from typing import Any

from operators.json_tree import first_place


def unicode_problem(text: str) -> str | None:
    """Why ``text`` is not valid Unicode text (None if it is): UTF-8 cannot encode a lone surrogate."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"holds a lone surrogate (\\u{ord(text[err.start]):04x}) at character {err.start}, which is not text"
    return None


def first_broken_text(value: Any, where: str = "") -> tuple[str, str] | None:
    """The first string in ``value`` (a JSON-like tree, keys included) that is not valid Unicode, as ``(its
    dotted place, why)``, or None (``json_tree.first_place``)."""
    return first_place(value, lambda item: unicode_problem(item) if isinstance(item, str) else None, where)
