"""How an error says what it refuses: a value on one line or bounded, a file name that is not UTF-8, a misspelt
name's close matches ("did you mean 'k'?"); the error of a kind in a chain a library wrapped; and the pointer to a
documentation page (``see_docs``).

Why apart from ``operators.errors``: these name no error class; the hierarchy there, and every module that words a
message (specs, params, the service, the CLI), use them. ``operators.errors`` re-exports them.
"""

from __future__ import annotations

import contextlib
import json
from contextvars import ContextVar
from typing import Any, Iterable, Iterator

#: Whether a refused value is shown as JSON writes it (``values_as_json``).
_AS_JSON: ContextVar[bool] = ContextVar("values_as_json", default=False)


def one_line(value: Any, limit: int | None = None) -> str:
    """``str(value)`` as one line for an error message: whitespace runs (newlines too) become one space, other
    control characters and undecodable bytes ``?`` (a file's text may be binary), cut at ``limit`` with "…"."""
    text = " ".join(str(value).split())
    text = "".join(ch if ch.isprintable() and ch != "\ufffd" else "?" for ch in text)
    return text if limit is None or len(text) <= limit else text[:limit] + "…"


def shown_name(path: str) -> str:
    """``path`` with each byte of a file name that is not UTF-8 (a surrogate, as Python reads it) written ``\\xNN``:
    a message or log line holding the surrogate itself could not be written as UTF-8 (a log file, pytest-xdist)."""
    return path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def in_chain(err: BaseException, kind: type | tuple[type, ...]) -> BaseException | None:
    """The first exception of ``kind`` in ``err``'s chain: itself, then its causes (or what it was raised while
    handling), link by link; None when none is. For an error a library wraps before it reaches the caller."""
    seen: set[int] = set()
    link: BaseException | None = err
    while link is not None and id(link) not in seen:
        if isinstance(link, kind):
            return link
        seen.add(id(link))
        link = link.__cause__ or link.__context__
    return None


def short_repr(value: Any, limit: int = 120) -> str:
    """A bounded repr for error messages: a value from a spec can be huge (or expand without end)."""
    import reprlib

    shortener = reprlib.Repr()
    shortener.maxlevel, shortener.maxlong = 3, 40
    shortener.maxlist = shortener.maxtuple = shortener.maxdict = shortener.maxset = 6
    shortener.maxstring = shortener.maxother = limit // 2
    text = shortener.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@contextlib.contextmanager
def values_as_json() -> Iterator[None]:
    """Within it, ``shown_json`` gives the JSON of a value: a request to the service, which is JSON (each one is
    within it: ``serve.http.json_values``), is told ``(got ["20"])``, ``(got null)``, not Python's ``['20']``, ``None``.
    A spec from YAML (``tessera run``) keeps ``short_repr``."""
    token = _AS_JSON.set(True)
    try:
        yield
    finally:
        _AS_JSON.reset(token)


def shown_json(value: Any, limit: int = 120) -> str | None:
    """``value`` as JSON on one line, cut at ``limit`` like ``short_repr``, inside ``values_as_json``; None outside
    it, or for a value JSON cannot write."""
    if not _AS_JSON.get():
        return None
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        return None
    return text if len(text) <= limit else text[: limit - 3] + "..."


def unknown_name_hint(name: str, known: Iterable[str], what: str) -> str:
    """``"; did you mean 'k'? (parameters: index, k)"``: the close matches of a misspelt ``name`` and every
    known name (``close_names``)."""
    known = sorted(known)
    if not known:
        return f" (this operator has no {what})"
    key, colon, value = name.partition(":")  # YAML's {op:bm25} is one key of no value
    hint = f"put a space after the colon ({key}: {value}): YAML reads {name!r} as one name" if colon and key in known \
        and value and not value.startswith(" ") else did_you_mean(close_names(name, known))
    return f"{hint and '; ' + hint} ({what}: {', '.join(known)})"


def did_you_mean(close: Iterable[str]) -> str:
    """``"did you mean 'k'?"`` (``'a' or 'b'`` for several), or ``""`` for none: how a suggestion of close names is
    said (params, operators, fusion branches)."""
    close = list(close)
    return f"did you mean {' or '.join(repr(k) for k in close)}?" if close else ""


def close_names(name: str, known: Iterable[str], *, words: bool = True) -> list[str]:
    """The (at most three) ``known`` names a misspelt ``name`` is closest to, best first (``difflib``; a name that
    only differs in case or ``-``/``_`` is the first match, and, with ``words``, a name that is a word of it the last
    resort). Only a typo's distance counts as close (``is_typo_of``): difflib alone offered ``ingest`` for ``mine``."""
    import difflib

    known = sorted(known)
    folded = {k.lower().replace("-", "_"): k for k in known}
    close = [folded[f] for f in [name.lower().replace("-", "_")] if f in folded]
    close += [k for k in difflib.get_close_matches(name, known, n=6, cutoff=0.6)
              if k not in close and is_typo_of(name, k)]
    if not close and words:  # top_k -> k: a name that is a word of the misspelt one
        close = [k for k in known if k in name.lower().replace("-", "_").split("_")]
    return close[:3]


def is_typo_of(name: str, known: str) -> bool:
    """Whether ``name`` is ``known`` with a few typing slips: at most one edit (a letter added, left out, changed or
    two swapped) per four letters of the longer, and one for any length (``bm2``, ``hybrd``, ``rga``, ``tpo``)."""
    from rapidfuzz.distance import OSA  # optimal string alignment: Levenshtein with a swap of neighbours one edit

    slips = max(1, max(len(name), len(known)) // 4)
    return OSA.distance(name.lower(), known.lower(), score_cutoff=slips) <= slips


def see_docs(page: str, heading: str = "") -> str:
    """``docs/llm.md, Model aliases (`tessera docs llm`)``: where a message sends its reader, with the command that
    prints the page, which works where no ``docs/`` folder is (Tessera installed from a wheel, whose pages are in
    ``share/tessera/docs``). tests/test_docs_command.py checks that each page and heading named so exists."""
    return f"docs/{page}.md{', ' + heading if heading else ''} (`tessera docs {page}`)"
