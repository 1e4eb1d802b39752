"""Text that UTF-8 can carry: JSON allows a lone surrogate (``"\\ud83d"``), which no tokenizer, YAML file or
HTTP answer can take, so text from outside is checked where it comes in (request bodies, flow specs). Text with no
word to search for (``blank``: the service's queries and messages, ``tessera chat``'s lines). And text that BM25
tokenizes: one letter written two ways is one token, a word with vowel signs one word, an invisible character no
break."""

from __future__ import annotations

import functools
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


#: Letters and symbols that show as nothing (the Hangul fillers, the blank Braille pattern).
BLANK_LOOKING = frozenset("\u115f\u1160\u3164\uffa0\u2800")
#: What ``blank`` text may hold: control, format (invisible) and combining characters with no letter to sit on.
_NOTHING_TO_READ = ("Cc", "Cf", "Mn", "Me")


def blank(text: str) -> bool:
    """Whether a query holds nothing to search for: only whitespace, control characters (a NUL, which
    ``str.strip`` keeps), invisible format characters (a zero-width space, a byte-order mark, a soft hyphen),
    combining marks with no letter (a variation selector) and letters that show as nothing (``BLANK_LOOKING``), no
    word to match: searched for, it would bring arbitrary documents, as a blank one would."""
    return all(char.isspace() or char in BLANK_LOOKING or unicodedata.category(char) in _NOTHING_TO_READ
               for char in text)


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


#: Where Unicode puts combining marks and invisible format characters: the BMP, the supplementary planes' scripts and
#: symbols, the tags and variation selectors (a scan of these takes about 0.03 s, of all code points 0.7 s).
_SPANS = ((0, 0x20000), (0xE0000, 0xE1000))


@functools.cache
def code_points(kind: str) -> frozenset[str]:
    """Every character whose general category starts with ``kind`` (``M``: combining marks, ``Cf``: invisible
    format characters)."""
    return frozenset(chr(cp) for lo, hi in _SPANS for cp in range(lo, hi)
                     if unicodedata.category(chr(cp)).startswith(kind))


@functools.cache
def code_point_class(kind: str) -> str:
    """``code_points(kind)`` as the body of a regex character class, in ranges."""
    return character_class(code_points(kind))


def character_class(chars: frozenset[str]) -> str:
    """``chars`` as the body of a regex character class, in ranges."""
    found: list[tuple[int, int]] = []
    for cp in sorted(map(ord, chars)):
        if found and found[-1][1] == cp - 1:
            found[-1] = (found[-1][0], cp)
        else:
            found.append((cp, cp))
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in found)


def holds(text: str, kind: str) -> bool:
    """Whether ``text`` holds a character of ``code_points(kind)`` (a set lookup: a regex class of them is ten times
    slower on text that has none)."""
    return not text.isascii() and not code_points(kind).isdisjoint(text)


#: The one invisible character that breaks words: Thai, Khmer and some Japanese text mark word ends with it.
WORD_BREAK = "\u200b"


@functools.cache
def _invisible() -> frozenset[str]:
    return code_points("Cf") - {WORD_BREAK}


def visible(text: str) -> str:
    """``text`` without the invisible format characters that sit inside words without breaking them (a soft
    hyphen, as HTML's ``inter&shy;national``; the zero-width joiners, the word joiner, a byte-order mark, direction
    marks). A zero-width space stays, a break between words (``WORD_BREAK``)."""
    if text.isascii() or _invisible().isdisjoint(text):
        return text
    invisible = _invisible()
    return "".join(char for char in text if char not in invisible)


def folded(text: str) -> str:
    """Lower-cased ``text`` with Turkish's four i one letter: ``str.lower`` makes ``İ`` an ``i`` with a combining dot
    (kept inside the word, it matched no ``istanbul``) and keeps the dotless ``ı`` (``IĞDIR`` and ``Iğdır`` were
    ``iğdir`` and ``iğdır``)."""
    text = text.lower()
    return text if text.isascii() else text.replace("i\u0307", "i").replace("\u0131", "i")


def whole_characters(text: str, end: int) -> str:
    """``text[:end]`` without a character it would cut in two: a cut inside a user-perceived character (a grapheme
    cluster, by the ``regex`` module's ``\\X``: a flag's two letters, an emoji joined with U+200D, a letter and its
    combining marks, a Devanagari syllable) moves back to its start. Cut by code points, ``🇯🇵`` left ``🇯`` (shown as
    a boxed J), a family emoji one of its people, ``हिन्दी`` a dangling virama."""
    if end >= len(text):
        return text
    if end <= 0:
        return ""
    if text.isascii():  # every ASCII character is one (but CR LF, harmless cut in two)
        return text[:end]
    import regex

    for match in regex.finditer(r"\X", text):
        if match.end() > end:
            return text[:match.start()]
    return text[:end]
