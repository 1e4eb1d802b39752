"""Sentence ends of Chinese and Japanese text, which Punkt's European models never find: they take a sentence end
for one only where a space follows it, and ``。`` is followed by the next sentence's first character, so a Chinese
or Japanese document was one sentence (a chunk of ``unit: sentences`` was the whole document, far over what an
encoder reads; ``generate.context``'s ``fit: share`` had one "first sentence" to cut at a token).

A Punkt sentence that holds an ideographic full stop or a full-width ``！``/``？`` is cut again by the ``punkt``
package's own Chinese rules (``punkt.rules.presets.CHINESE``, which Japanese shares: no space needed after an end, a
closing ``」`` or ``”`` stays with the sentence it closes), without ``…``: ``……`` is a pause inside a Chinese or
Japanese sentence as often as at its end. ASCII ``!``/``?`` end a sentence there too (such text mixes the widths).
``；`` and ``，`` end no sentence; they are where an over-long sentence is cut (``clause_end``). A text without those
marks (English, every text of the shared data) is split exactly as before.
"""

from __future__ import annotations

import dataclasses
import functools
import re

#: The marks that end a sentence only in Chinese or Japanese text; a Punkt sentence without one is left whole.
MARKS = ("。", "！", "？")
#: Where a sentence too long for a chunk is best cut when it has no space: after a clause's mark.
_CLAUSE_END = re.compile("[；，、：]")


@functools.cache
def _tokenizer():
    import punkt
    from punkt.rules.presets import CHINESE

    rules = dataclasses.replace(CHINESE, sent_end_chars=(*MARKS, "!", "?"))
    return punkt.PunktSentenceTokenizer(punkt.PunktParameters(), rules=rules)


def holds_marks(text: str) -> bool:
    return not text.isascii() and any(mark in text for mark in MARKS)


def split(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` (Punkt's sentences of ``text``) with each one that holds a Chinese or Japanese sentence end cut at
    its ends."""
    if not holds_marks(text):
        return spans
    out: list[tuple[int, int]] = []
    for begin, end in spans:
        if holds_marks(text[begin:end]):
            out += [(begin + a, begin + b) for a, b in _tokenizer().span_tokenize(text[begin:end])]
        else:
            out.append((begin, end))
    return out


def clause_end(text: str, lo: int, hi: int) -> int:
    """The end of the last full-width clause mark (``，``, ``；``, ``、``, ``：``) in ``text[lo:hi]``, or -1."""
    found = -1
    for match in _CLAUSE_END.finditer(text, lo, hi):
        found = match.end()
    return found


def cut_points(text: str):
    """Where a chunk of ``text`` counted in a model's pieces may end, as character positions: ``(sentence starts,
    clause starts)`` (after ``。！？``, and after ``，；、：``), or None for a text without a Chinese or Japanese
    sentence end. A model's tokenizer writes each such character as a piece with no space between them, so a
    paragraph was one "word" to ``_model_windows``: a chunk of one longer than the chunk ended at its 200th piece,
    inside a word (``氨|基酸``), and shared no piece with the next."""
    if not holds_marks(text):
        return None
    import numpy as np

    sentences = np.array([begin for begin, _ in _tokenizer().span_tokenize(text)], np.int64)
    return sentences, np.array([match.end() for match in _CLAUSE_END.finditer(text)], np.int64)
