"""Main-text extraction by a moving average of sentence length."""

from __future__ import annotations

import re
from itertools import accumulate
from typing import Literal, NamedTuple

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.tables import set_column, text_column


class ContentExtractor(Operator):
    """Keep the main text of a page (e.g. crawled HTML as text), dropping menus, link lists and footers.

    The text is cut into sentences (line breaks always end one); every sentence gets
    the average word count of the ``window`` sentences around it. Runs where that
    average stays above half of ``threshold`` and reaches it somewhere are content,
    widened to whole sentences on the same lines: short sentences inside an article
    stay, runs of short lines (menus, "Share", "Read more", copyright) go. Short
    unpunctuated (or very short, one-line) segments at the edge of a run are
    trimmed, runs with fewer than ``min_words`` words are dropped, and a text with
    fewer than ``min_words`` words is left as it is. The kept text is sliced from
    the original, so kept paragraphs are unchanged.

    Usage::

        ContentExtractor({"threshold": 8, "min_words": 10})(pa.table({"text": [
            "Home\\nNews\\nThe honey bee is a flying insect that collects nectar and makes honey. "
            "Bees pollinate many of the flowering plants that people grow for food.\\nContact us"]}))
        # text: ["The honey bee is a flying insect ... that people grow for food."]
    """

    name = "preprocess.content_extract"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        input_column: str = Field("text", description="Column holding the page text (lines separated by newlines).")
        output_column: str | None = Field(
            None, description="Column that receives the extracted text; None writes it back into input_column."
        )
        window: int = Field(3, ge=1, description="Number of consecutive sentences the moving average spans.")
        threshold: float = Field(
            12.0, gt=0, description="Minimum moving average of words per sentence for a sentence to be content."
        )
        min_words: int = Field(
            30, ge=0, description="A content run with fewer words is dropped; a shorter text is left unchanged."
        )
        fallback: Literal["original", "empty"] = Field(
            "original", description="What a text with no content run becomes: itself ('original') or ''."
        )

    @property
    def output_column(self) -> str:
        return self.params.output_column or self.params.input_column

    def reads(self) -> list[str]:
        return [self.params.input_column]

    def produces(self) -> dict[str, str]:
        return {self.output_column: "text"}

    def transform(self, table: pa.Table) -> pa.Table:
        texts = text_column(table, self.params.input_column, op=self.name, step=self.step_id)
        p = self.params
        out = [None if t is None else extract_content(t, p.window, p.threshold, p.min_words, p.fallback)
               for t in texts.to_pylist()]
        return set_column(table, self.output_column, pa.array(out, texts.type))


_SENTENCE_BREAK = re.compile(r"(?:(?<=[.!?…])|(?<=[.!?…][\"'”’»)\]]))\s+")
_WORD = re.compile(r"[^\W_]+")
_TERMINAL = re.compile(r"[.!?…:][\"'”’»)\]]*$")
_LINE = re.compile(r"[^\n\r]+")
#: A run of content goes on while the moving average stays above this share of the threshold.
_CONTINUE = 0.5


class Segment(NamedTuple):
    """One sentence: its span in the text, its words, and whether it fills its line(s) alone."""

    start: int
    end: int
    words: int
    alone: bool


def split_segments(text: str) -> list[Segment]:
    """Every sentence of ``text``, as spans of the original text.

    Lines are cut at sentence ends; a piece that starts in lower case continues the
    sentence before it (after an abbreviation, or a line wrapped mid-sentence), and
    so does a piece after an abbreviation such as ``c.`` or ``e.g.``.
    """
    spans: list[list[int]] = []
    line_edges: set[int] = set()
    for line in _LINE.finditer(text):
        line_edges.update((line.start(), line.end()))
        pos, first = line.start(), True
        for piece in _SENTENCE_BREAK.split(line.group()):
            start = text.index(piece, pos) if piece else pos
            pos = start + len(piece)
            stripped = piece.strip()
            if not stripped:
                continue
            start += len(piece) - len(piece.lstrip())
            end = start + len(stripped)
            if spans and _continues(text, spans[-1], stripped, same_line=not first):
                spans[-1][1] = end
            else:
                spans.append([start, end])
            first = False
    return [
        Segment(a, b, len(_WORD.findall(text, a, b)), a in line_edges and b in line_edges) for a, b in spans
    ]


def _continues(text: str, previous: list[int], piece: str, same_line: bool) -> bool:
    if not piece[0].islower():
        return same_line and _ends_with_abbreviation(text[previous[0]:previous[1]])
    return same_line or not _TERMINAL.search(text, previous[0], previous[1])


def _ends_with_abbreviation(sentence: str) -> bool:
    last = sentence.rsplit(None, 1)[-1].rstrip("\"'”’»)]")
    if not last.endswith("."):
        return False
    stem = last.rstrip(".")
    return "." in stem or (stem.isalpha() and len(stem) <= 2)


def extract_content(text: str, window: int, threshold: float, min_words: int, fallback: str) -> str:
    """The content runs of ``text`` (see :class:`ContentExtractor`)."""
    segments = split_segments(text)
    words = [seg.words for seg in segments]
    if sum(words) < min_words:
        return text
    n = len(words)
    left, right = (window - 1) // 2, window - 1 - (window - 1) // 2
    sums = [0, *accumulate(words)]
    average = []
    for i in range(n):
        lo, hi = max(0, i - left), min(n, i + right + 1)
        average.append((sums[hi] - sums[lo]) / (hi - lo))

    # Runs where the average stays above half the threshold and reaches it somewhere,
    # so one short sentence neither cuts a paragraph in two nor loses its first line.
    kept: list[int] = []
    i = 0
    while i < n:
        if average[i] < threshold * _CONTINUE:
            i += 1
            continue
        j = i
        while j < n and average[j] >= threshold * _CONTINUE:
            j += 1
        if max(average[i:j]) < threshold:
            i = j
            continue
        # A paragraph is kept whole: the run takes in the full sentences around it on its lines.
        while i > 0 and kept[-1:] != [i - 1] and _same_paragraph(text, segments[i - 1], segments[i]):
            i -= 1
        while j < n and _same_paragraph(text, segments[j], segments[j - 1]):
            j += 1
        run = list(range(i, j))
        i = j
        while run and _is_edge_noise(text, segments[run[0]], threshold):
            run.pop(0)
        while run and _is_edge_noise(text, segments[run[-1]], threshold):
            run.pop()
        if run and sum(words[k] for k in run) >= min_words:
            kept.extend(run)
    if not kept:
        return text if fallback == "original" else ""

    # Adjacent kept sentences are one slice of the original text; gaps become a line break
    # (or a space, inside one line).
    out: list[str] = []
    previous = None
    for k in kept:
        seg = segments[k]
        if previous is not None and previous == k - 1:
            out[-1] = out[-1] + text[segments[k - 1].end:seg.end]
        else:
            if out:
                gap = text[segments[previous].end:seg.start]
                out.append("\n" if "\n" in gap or "\r" in gap else " ")
            out.append(text[seg.start:seg.end])
        previous = k
    return "".join(out)


def _same_paragraph(text: str, seg: Segment, neighbour: Segment) -> bool:
    """``seg`` is a full sentence on the same line as ``neighbour``."""
    lo, hi = min(seg.end, neighbour.end), max(seg.start, neighbour.start)
    gap = text[lo:hi]
    return "\n" not in gap and "\r" not in gap and bool(_TERMINAL.search(text, seg.start, seg.end))


def _is_edge_noise(text: str, seg: Segment, threshold: float) -> bool:
    """A short segment at the edge of a run that does not end like a sentence, or is very short and alone.

    Headings, bylines, "Share" or "Read more" links look like this; the short last
    sentence of a paragraph does not.
    """
    if seg.words >= threshold:
        return False
    return not _TERMINAL.search(text, seg.start, seg.end) or (seg.alone and seg.words < threshold / 2)
