"""TREC topic files, as TREC's tracks ship their queries: the classic form (``<top> <num> Number: 301 <title> ...
</top>``: Robust04's ``topics.301-450``) and the XML form (``<topic number="1"><query>...</query>``: TREC-COVID,
the Web track). Why a reader of their own: read a line at a time, such a file ran one query per tag line (``<top>``,
``<num> Number: 301``) silently. A topic's query is its title (the XML form's ``<query>``), as PyTerrier's
``read_topics`` takes it by default; the description and narrative are for assessors. Read with regular
expressions, not an XML parser: the tags are few, the classic form is not XML, and no entity is expanded."""

from __future__ import annotations

import html
import re
from pathlib import Path

from operators.errors import SpecError

_TOP = re.compile(r"<top>(.*?)(?:</top>|\Z)", re.S | re.I)
_TAG = re.compile(r"<(num|title|desc|narr|con|def|fac|nat|smry|dom)>", re.I)
_LABEL = re.compile(r"^\s*(?:number|topic)\s*:\s*", re.I)
_TOPIC = re.compile(r"<topic\b([^>]*)>(.*?)</topic>", re.S | re.I)
_NUMBER = re.compile(r"""\bnumber\s*=\s*["']?([^"'\s>]+)""", re.I)
_QUERY = re.compile(r"<(?:query|title)>(.*?)</(?:query|title)>", re.S | re.I)


def topic_form(text: str) -> str | None:
    """``"classic"`` or ``"xml"`` where ``text`` starts as a TREC topic file does, else None."""
    start = text.lstrip().lower()
    if start.startswith("<top>"):
        return "classic"
    if start.startswith(("<topics", "<topic ", "<?xml")) and "<topic" in start:
        return "xml"
    return None


def read_topics(text: str, where: str | Path) -> list[tuple[str, str, str]]:
    """Each topic's ``(qid, query, where)``: its number and title, and ``FILE:LINE`` of its start. A topic without
    a number or a title is a ``SpecError`` naming its line; so is a file that holds none."""
    classic = topic_form(text) == "classic"
    found = []
    for match in (_TOP if classic else _TOPIC).finditer(text):
        at = f"{where}:{text.count(chr(10), 0, match.start()) + 1}"
        if classic:
            fields = _classic_fields(match.group(1))
            number, title = _LABEL.sub("", fields.get("num", "")), _LABEL.sub("", fields.get("title", ""))
        else:
            numbered = _NUMBER.search(match.group(1))
            number = numbered.group(1) if numbered else ""
            query = _QUERY.search(match.group(2))
            title = html.unescape(query.group(1)) if query else ""
        number, title = (number or "").strip(), " ".join(title.split())
        if not number:
            raise SpecError(f"{at}: a TREC topic without its number ({'<num>' if classic else 'number='})",
                            field="queries")
        if not title:
            raise SpecError(f"{at}: TREC topic {number} has no {'<title>' if classic else '<query>'} text",
                            field="queries")
        found.append((number, title, at))
    if not found:
        raise SpecError(f"{where}: starts as a TREC topic file but holds no complete topic "
                        f"({'<top> ... </top>' if classic else '<topic number=...> ... </topic>'})", field="queries")
    return found


def _classic_fields(body: str) -> dict[str, str]:
    """``{tag: text}`` of a classic topic: each tag's text runs to the next tag (they are not closed)."""
    marks = list(_TAG.finditer(body))
    return {m.group(1).lower(): body[m.end():(marks[i + 1].start() if i + 1 < len(marks) else len(body))]
            for i, m in enumerate(marks)}
