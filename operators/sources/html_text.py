"""The title and the text a reader sees of an HTML page, without the page's own furniture.

A saved web page repeats its site's menus, banner and footer on every page: as text of each document they make
every page match a query for a menu item, and fill a model's context with them. HTML5 marks them: ``<nav>``, and
a ``<header>``, ``<footer>`` or ``<aside>`` of the page (not one inside an ``<article>`` or ``<main>``, where a
header holds the article's title). They are left out, and where the page has a ``<main>`` its text alone is kept.
A page whose whole text is in such elements keeps it all (a fragment of a menu is still a document). Read with the
standard library's ``html.parser``, which takes any HTML a browser does without failing.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

#: Elements whose content is not text a reader sees.
_HIDDEN = frozenset({"script", "style", "noscript", "template", "svg", "head", "iframe", "object"})
#: Elements of a page's furniture, outside its content (``_CONTENT``); ``nav`` wherever it is.
_FURNITURE = frozenset({"header", "footer", "aside"})
_CONTENT = frozenset({"article", "main"})
#: Elements that start a new line of text.
_BLOCKS = frozenset({"address", "article", "aside", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption",
                     "figure", "footer", "form", "h1", "h2", "h3", "h4", "h5", "h6", "header", "hr", "li", "main",
                     "nav", "ol", "p", "pre", "section", "table", "td", "th", "tr", "ul", "body"})
_SPACES = re.compile(r"\s+")
#: Elements without an end tag (no content to hide).
_VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
                   "wbr"})


class _Open:
    """A stack of open elements of some kinds, closed with anything left open inside them."""

    def __init__(self) -> None:
        self.tags: list[str] = []

    def open(self, tag: str) -> None:
        self.tags.append(tag)

    def close(self, tag: str) -> None:
        if tag in self.tags:
            del self.tags[len(self.tags) - 1 - self.tags[::-1].index(tag):]

    def __bool__(self) -> bool:
        return bool(self.tags)


class _HtmlText(HTMLParser):
    """Collects the ``<title>``, the first ``<h1>`` with text, and the visible text, three ways: all of it, without
    the furniture, and the ``<main>``'s; the body's alone when the page has a ``<body>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.title: list[str] = []
        self.outside: list[str] = []  # text outside <body>, for a fragment without one
        self.body: list[str] | None = None
        self.content: list[str] = []  # without the furniture
        self.main: list[str] | None = None  # inside <main>, once one opened
        self.hidden, self.furniture, self.within, self.in_main = _Open(), _Open(), _Open(), _Open()
        self.in_title = False
        self.heading = ""  # the first <h1>'s text outside the furniture, once one closed with text
        self.banner_heading = ""  # the first <h1>'s text in the furniture (a site's name in its header)
        self.h1: list[str] | None = None  # the text of the <h1> open now
        self.h1_in_furniture = False
        self.pre = 0  # open <pre> elements

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "title":
            self.in_title = True
        elif tag == "body" and self.body is None:
            self.body, self.content = [], []  # the body's text alone, as for every
        if tag == "h1" and not self.heading and not self.hidden:
            self.h1, self.h1_in_furniture = [], bool(self.furniture)
        if tag in _VOID:
            pass
        elif tag in _HIDDEN:
            self.hidden.open(tag)
        elif tag == "nav" or (tag in _FURNITURE and not self.within):
            self.furniture.open(tag)
        if tag in _CONTENT and tag not in _VOID:
            self.within.open(tag)
        if tag == "main":
            self.in_main.open(tag)
            self.main = [] if self.main is None else self.main
        if tag in _BLOCKS:
            self._add("\n")
        self.pre += tag == "pre"

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self.in_title = False
        elif tag == "h1" and self.h1 is not None:
            text, self.h1 = " ".join("".join(self.h1).split()), None
            if not self.h1_in_furniture:
                self.heading = text
            elif not self.banner_heading:
                self.banner_heading = text
        self.pre -= tag == "pre" and self.pre > 0
        for stack in (self.hidden, self.furniture, self.within, self.in_main):
            stack.close(tag)
        if tag in _BLOCKS:
            self._add("\n")

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title.append(data)
        elif not self.hidden:  # a line break in the source is a space, but in <pre>
            if self.h1 is not None:
                self.h1.append(data)
            self._add(data if self.pre else _SPACES.sub(" ", data))

    def _add(self, text: str) -> None:
        (self.outside if self.body is None else self.body).append(text)
        if not self.furniture:
            self.content.append(text)
            if self.in_main and self.main is not None:
                self.main.append(text)


def html_text(html: str) -> tuple[str | None, str]:
    """The title and the visible text of an HTML page.

    The title is the ``<title>``, else the first ``<h1>``'s text outside the page's header, nav, footer and aside
    (a page saved without a title names itself there, where a site's header often holds the site's name in an
    ``<h1>`` on every page), else the first ``<h1>`` there; None without either. The text is the ``<main>``'s
    where the page has one, else the ``<body>``'s (all of a fragment's) without the page's ``<nav>``,
    ``<header>``, ``<footer>`` and ``<aside>`` (unless that leaves nothing), without scripts and styles, a line per
    block element, spaces within a line collapsed."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    title = " ".join("".join(parser.title).split()) or parser.heading or parser.banner_heading
    every = parser.body if parser.body is not None else parser.outside
    for parts in (parser.main or [], parser.content, every):
        text = _lines(parts)
        if text:
            return title or None, text
    return title or None, ""


def _lines(parts: list[str]) -> str:
    lines = (" ".join(line.split()) for line in "".join(parts).splitlines())
    return "\n".join(line for line in lines if line)
