"""Text that UTF-8 can carry: JSON allows a lone surrogate (``"\\ud83d"``), which no tokenizer, YAML file or
HTTP answer can take, so text from outside is checked where it comes in (request bodies, flow specs)."""

from __future__ import annotations

from typing import Any


def unicode_problem(text: str) -> str | None:
    """Why ``text`` is not valid Unicode text (None if it is): UTF-8 cannot encode a lone surrogate."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return f"holds a lone surrogate (\\u{ord(text[err.start]):04x}) at character {err.start}, which is not text"
    return None


def first_broken_text(value: Any, where: str = "") -> tuple[str, str] | None:
    """The first string in ``value`` (a JSON-like tree, keys included) that is not valid Unicode, as ``(its
    dotted place, why)``, or None. A list or dict met again (Python can share one where JSON cannot) is looked
    at once."""
    seen: set[int] = set()
    stack = [(where, value)]
    while stack:
        place, item = stack.pop()
        if isinstance(item, str):
            problem = unicode_problem(item)
            if problem is not None:
                return place, problem
            continue
        if not isinstance(item, (dict, list)) or id(item) in seen:
            continue
        seen.add(id(item))
        pairs = list(item.items()) if isinstance(item, dict) else list(enumerate(item))
        for key, child in reversed(pairs):  # reversed: popped in order, so the first broken one is found first
            child_place = f"{place}.{key}" if place else str(key)
            stack.append((child_place, child))
            if isinstance(key, str):
                stack.append((child_place, key))
    return None
