"""Dates, years and ranges in English text, normalised to ISO 8601 (``analyze.dimensions``' temporal half).

Precision before recall. dateparser's ``search_dates`` finds dates by trying to parse
every phrase, so it also returns "now", "a day", "may" and any number as a year; here
only shapes that are unmistakably temporal are taken, and dateparser parses the ones
with a month (it checks the day exists and knows every spelling of a month):

* full dates (``20 July 1969``, ``July 20, 1969``, ``1969-07-20``) -> ``1969-07-20``;
* a month and a year (``July 1969``) -> ``1969-07``;
* year ranges (``1939–1945``, ``1939-45``, ``from 1939 to 1945``, ``between 1901 and 2000``)
  -> ``1939/1945`` (an ISO 8601 interval);
* decades (``the 1960s``) -> ``1960/1969``; centuries (``19th century``, ``the 1800s``) -> ``1800/1899``
  (``the 2000s`` stays the decade, as English reads it);
* a bare year only after a word that makes it one (``in``, ``since``, ``until``, ``c.``,
  ``early`` ...) or alone in parentheses (``(1951)``, ``(born 1879)``); a bare year or a
  range followed by a lowercase word that is not a function word is a quantity, not a
  time (``in 1500 metres``, ``by 2000 people``), and is left alone.

Years BC (``BC``, ``BCE``, ``B.C.``, ``B.C``; also their decades and centuries) are left out (ISO
8601 would need astronomical years); so are years outside ``[min_year, max_year]``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_MONTH = (r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
          r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?")
_YEAR = r"(?:1\d{3}|20\d{2})"
_DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
#: An era before the common one (BC, BCE, B.C., B.C.E., B.C): then the number is not a year of ISO's calendar.
_BC = r"(?:BCE?|B\.C)\b"
#: An era or a unit that no word is needed for: then the number is not a year of ISO's calendar.
_NOT_A_YEAR = rf"(?!\s*(?:%|{_BC}|years?\b|per\b))"
#: Words that may follow a bare year or a range of years; any other lowercase word makes the number a
#: quantity ("in 1500 metres", "by 2000 people", "in 1200 games"), so the number is left alone.
_FUNCTION_WORDS = frozenset("""
    a an the this that these those his her its their our my your he she it they we i you there here
    and or but nor as so yet if when while whereas where which who whom whose what than then also only
    after before until till since during following upon under over with without within by for from in into
    on onto at to of through throughout against among amid between beyond toward towards near about around
    is was were are be been being had has have did do does would could should might may must will can
    became become saw marked not no both each all some most many several either neither
    """.split())
_END = r"(?![\d\w])"
_CUE = (r"(?:[Ii]n|[Ss]ince|[Uu]ntil|[Tt]ill|[Dd]uring|[Aa]fter|[Bb]efore|[Aa]round|[Aa]bout|[Cc]irca|c\.|ca\."
        r"|[Ee]arly|[Mm]id|[Ll]ate|[Bb]y|[Ff]rom|[Yy]ear|[Ss]ummer of|[Ww]inter of|[Ss]pring of|[Aa]utumn of"
        r"|[Ff]all of|[Aa]s of|[Ss]tarting in|[Bb]orn|[Dd]ied)")
_NEXT_WORD = re.compile(r"\s*([^\W\d_][\w-]*)")

_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("range", re.compile(rf"\b(?:[Ff]rom|[Bb]etween)\s+({_YEAR})\s+(?:to|and|until|till)\s+({_YEAR}){_END}"
                         + _NOT_A_YEAR)),
    ("date", re.compile(rf"\b(?:{_DAY}\s+{_MONTH},?\s+{_YEAR}|{_MONTH}\s+{_DAY},?\s+{_YEAR}){_END}"
                        + _NOT_A_YEAR)),
    ("iso", re.compile(rf"\b({_YEAR})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01]){_END}")),
    ("range", re.compile(rf"(?<![\d\w.,-])(?<!pp\.\s)(?<!p\.\s)({_YEAR})\s*(?:–|—|-|to)\s*({_YEAR}|\d{{2}}){_END}"
                         + _NOT_A_YEAR)),
    ("month", re.compile(rf"\b{_MONTH},?\s+{_YEAR}{_END}" + _NOT_A_YEAR)),
    ("decade", re.compile(rf"\b((?:1\d\d|20\d)0)'?s\b(?!\s*{_BC})")),
    ("century", re.compile(rf"\b([1-9]|1\d|20)(?:st|nd|rd|th)[ -]century\b(?!\s*{_BC})")),
    ("year", re.compile(rf"\b{_CUE}\s+({_YEAR}){_END}" + _NOT_A_YEAR)),
    ("year", re.compile(rf"\((?:born\s+|died\s+|b\.\s*|d\.\s*|c\.\s*)?({_YEAR})\)")),
]


@dataclass(frozen=True)
class Mention:
    """One temporal expression: its ISO 8601 form and the years it covers."""

    iso: str
    start: int
    end: int


def find_dates(text: str, *, min_year: int = 1000, max_year: int = 2100) -> list[Mention]:
    """The temporal expressions of ``text``, in order; of overlapping matches the earlier pattern's decides."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, Mention]] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(text):
            span = match.span()
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue
            taken.append(span)  # a rejected match claims its span too: no shorter pattern takes a part of it
            if kind in ("year", "range") and not _ends_a_phrase(text, span[1]):
                continue
            mention = _normalise(kind, match)
            if mention is not None and min_year <= mention.start and mention.end <= max_year:
                found.append((span[0], mention))
    return [mention for _, mention in sorted(found, key=lambda item: item[0])]


def _ends_a_phrase(text: str, end: int) -> bool:
    """Nothing, punctuation, a capitalised word or a function word follows: the number is no quantity."""
    following = _NEXT_WORD.match(text, end)
    if following is None:
        return True
    word = following.group(1)
    return word[0].isupper() or word in _FUNCTION_WORDS


def _normalise(kind: str, match: re.Match) -> Mention | None:
    if kind == "iso":
        return _parsed(match.group(0))
    if kind in ("date", "month"):
        return _parsed(" ".join(match.group(0).split()))
    if kind == "range":
        first, last = match.group(1), match.group(2)
        if len(last) == 2:  # 1939-45
            last = first[:2] + last
        start, end = int(first), int(last)
        return Mention(f"{start}/{end}", start, end) if start < end else None
    if kind == "decade":
        start = int(match.group(1))
        last = start + 99 if start % 100 == 0 and start < 2000 else start + 9  # the 1800s: a century
        return Mention(f"{start}/{last}", start, last)
    if kind == "century":
        start = (int(match.group(1)) - 1) * 100
        return Mention(f"{start:04d}/{start + 99:04d}", start, start + 99)
    year = int(match.group(1))
    return Mention(f"{year:04d}", year, year)


@functools.lru_cache(maxsize=8192)
def _parsed(phrase: str) -> Mention | None:
    """A phrase with a month parsed by dateparser; None when it is not a real day (30 February)."""
    data = _parser().get_date_data(phrase)
    moment = data.date_obj
    if moment is None:
        return None
    iso = moment.strftime("%Y-%m-%d") if data.period == "day" else moment.strftime("%Y-%m")
    return Mention(iso, moment.year, moment.year)


@functools.lru_cache(maxsize=1)
def _parser():
    from dateparser.date import DateDataParser

    # English only (no language detection per phrase), the year required, nothing filled in from today.
    return DateDataParser(languages=["en"], settings={"REQUIRE_PARTS": ["year"], "PREFER_DAY_OF_MONTH": "first"})
