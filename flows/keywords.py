"""Keyword arguments of the Python API checked by name, so a misspelt one says which was meant.

Python's own ``TypeError: run() got an unexpected keyword argument 'keephistory'`` names the typo only; a notebook
user then reads the signature to find ``keep_history``. ``KeywordError`` is still a ``TypeError`` (what code that
catches Python's expects) and a ``TesseraError``, naming the argument and the close ones.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Collection, Iterable, TypeVar

from operators.errors import KeywordError, did_you_mean, unknown_name_hint

F = TypeVar("F", bound=Callable[..., Any])


def check_keywords(where: str, given: Iterable[str], known: Collection[str],
                   elsewhere: Callable[[str], str] | None = None) -> None:
    """Refuse the first of ``given`` not in ``known`` with a ``KeywordError`` naming ``where`` (``ingest()``);
    ``elsewhere(name)``: where such an argument is given instead, added to the error (``""``: nowhere)."""
    for name in given:
        if name not in known:
            number = [other for other in _singular_or_plural(name) if other in known]  # query= for queries=
            hint = f"; {did_you_mean(number)} (arguments: {', '.join(sorted(known))})" if number \
                else unknown_name_hint(name, known, "arguments")
            other = elsewhere(name) if elsewhere is not None and not number else ""
            raise KeywordError(f"{where} got an unexpected keyword argument {name!r}{hint}"
                               f"{'; ' + other if other else ''}", field=name)


def _singular_or_plural(name: str) -> list[str]:
    """``name``'s plural and singular forms (``query``: ``queries``; ``filters``: ``filter``): a keyword given in
    the other number, which is too many letters away for a typo (``close_names``)."""
    forms = [name + "s", name + "es", name[:-1] + "ies" if name.endswith("y") else ""]
    forms += [name[:-1], name[:-2]] if name.endswith("s") else []
    forms += [name[:-3] + "y"] if name.endswith("ies") else []
    return [form for form in forms if form]


def checked_keywords(func: F) -> F:
    """``func`` refusing a keyword its signature lacks as ``check_keywords`` does (for one without ``**kwargs``);
    under ``@classmethod`` for a class method."""
    params = list(inspect.signature(func).parameters.values())
    if params and params[0].name in ("self", "cls"):
        params = params[1:]
    known = frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
    where = f"{func.__qualname__}()"

    @functools.wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        if not known.issuperset(kwargs):  # an object's keyword_elsewhere says where such an argument goes instead
            # (a class method's first argument is its class, whose class_keyword_elsewhere says it)
            hook = "class_keyword_elsewhere" if args and isinstance(args[0], type) else "keyword_elsewhere"
            elsewhere = getattr(args[0], hook, None) if args else None
            check_keywords(where, kwargs, known, elsewhere if callable(elsewhere) else None)
        return func(*args, **kwargs)

    return checked  # type: ignore[return-value]
