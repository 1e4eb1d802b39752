"""Finding the first value of a JSON-like tree (mappings, lists, scalars) that fails a check, by its dotted place:
one walk for the checks that read a whole request body, spec or params (text that is not valid Unicode, a number
that is not finite)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, TypeVar

Problem = TypeVar("Problem")


def first_place(value: Any, problem: Callable[[Any], Problem | None], where: str = "") -> tuple[str, Problem] | None:
    """The dotted place (``steps.a.params.k``, list items by index) and ``problem(item)`` of the first item of
    ``value`` for which ``problem`` is not None, in document order, a mapping's key before its value; or None.
    Walked without recursion, and a list or mapping met again (YAML anchors, Python's shared lists, where JSON
    cannot share) is looked at once."""
    seen: set[int] = set()
    stack = [(where, value)]
    while stack:
        place, item = stack.pop()
        if not isinstance(item, (Mapping, list, tuple)):
            if (found := problem(item)) is not None:
                return place, found
            continue
        if id(item) in seen:
            continue
        seen.add(id(item))
        pairs = list(item.items()) if isinstance(item, Mapping) else list(enumerate(item))
        for key, child in reversed(pairs):  # reversed: popped in order, so the first one is found first
            child_place = f"{place}.{key}" if place else str(key)
            stack.append((child_place, child))
            if isinstance(key, str):
                stack.append((child_place, key))
    return None


def json_kind(value: Any) -> str:
    """What JSON calls ``value``'s type, for a message to a client who wrote JSON: ``null``, ``an array``, never
    Python's ``NoneType`` or ``list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    return f"a {type(value).__name__}"


def spec_kind(value: Any) -> str:
    """``value``'s kind in a spec's words (YAML's, and Python's for a dict spec): ``a list``, ``a mapping``, as a
    spec's errors say what a field must be; the others as ``json_kind`` says them (``null``, ``a string``). Only an
    HTTP body's own fields are said in JSON's words (``operators.errors.client_problems``)."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return json_kind(value)
