"""Where the units of a text start and end, for the chunker, vectorised with numpy.

A unit is a *token* (a run of word characters, or one other non-space character:
Python's ``\\w+|[^\\w\\s]`` with combining marks counted as word characters, so
``naïve`` and ``नमस्ते`` are one token and ``(``, ``,``, ``😀`` are tokens of their own), a *word* (a run of
non-whitespace, like ``str.split()``), or a
*sentence* (Punkt, from the ``punkt`` package, whose models ship in the wheel; Chinese and
Japanese ones cut at their ``。！？`` by ``_cjk_sentences``).

Tokens and words are found without a Python loop over characters: the UTF-8 bytes
of a whole batch are decoded to code points with numpy, each code point gets a class
(space, word, other) from a lookup table built once, and unit boundaries are where
the class changes. Each Chinese or Japanese character is a token and a word of its own (``unspaced_starts``, one
rule for both): such text has no spaces, so a paragraph was one word and a line one token. Sentences go through
Punkt one text at a time.
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np
import pyarrow as pa

from operators.preprocess import _cjk_sentences
from operators.unicode import whole_characters

SPACE, WORD, OTHER, CONTINUATION, CJK, MARK = 0, 1, 2, 3, 4, 5
#: Texts are processed in blocks of about this many UTF-8 bytes, to bound memory.
BLOCK_BYTES = 1 << 20

#: The bounds that keep a chunk's length in characters proportional to its ``size``: a unit (a token, a word, a
#: model's piece) of more than ``LONG_UNIT_CHARS`` characters is cut into parts of ``PART_CHARS``, each counted as
#: a unit (5 MB of text without a space was one token, or one ``[UNK]`` piece, so one chunk of 5 MB); a sentence
#: of more than ``LONG_SENTENCE_CHARS`` (a table with no full stop) into parts of at most ``SENTENCE_PART_CHARS``,
#: cut at a space where there is one; and no chunk spans a run of more than ``LONG_GAP_CHARS`` characters between
#: two units (spaces, or characters a model's tokenizer drops). Words and pieces of real text are far shorter.
LONG_UNIT_CHARS, PART_CHARS = 200, 10
LONG_SENTENCE_CHARS, SENTENCE_PART_CHARS = 2000, 1000
LONG_GAP_CHARS = 1000


def char_class(ch: str) -> int:
    if ch.isspace():
        return SPACE
    if ch.isalnum() or ch == "_" or unicodedata.category(ch).startswith("M"):
        return WORD
    return OTHER


@functools.cache
def unspaced_characters() -> frozenset[str]:
    """The Han, Hiragana and Katakana word characters (``store.cjk.cjk_characters`` less Korean's Hangul, which is
    written with spaces between words): each is a word of its own for ``unit: words``."""
    import regex

    from operators.store.cjk import cjk_characters

    return frozenset(regex.sub(r"\p{sc=Hangul}", "", "".join(cjk_characters())))


def _code_point_class(ch: str) -> int:
    """``char_class``, with ``CJK`` for the ``unspaced_characters`` and ``MARK`` for a combining mark (a word
    character, but one that stays with a ``CJK`` character before it: a kanji's variation selector)."""
    if ch in unspaced_characters():
        return CJK
    return MARK if unicodedata.category(ch).startswith("M") else char_class(ch)


@functools.cache
def _bmp_classes() -> np.ndarray:
    return np.array([_code_point_class(chr(c)) for c in range(0x10000)], dtype=np.uint8)


@functools.cache
def _byte_classes() -> np.ndarray:
    """Class by byte value: ASCII from the table, continuation bytes, lead bytes (decoded later)."""
    table = np.full(256, OTHER, np.uint8)
    table[:0x80] = _bmp_classes()[:0x80]
    table[0x80:0xC0] = CONTINUATION
    return table


def _classes(data: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Class of the code point every byte belongs to, and which bytes start a code point.

    The second value is ``None`` for pure ASCII (every byte starts one).
    """
    cls = _byte_classes()[data]
    lead = np.flatnonzero(data >= 0xC0)
    if not len(lead):
        return cls, None
    padded = np.concatenate([data, np.zeros(3, np.uint8)]).astype(np.uint32)
    b0 = padded[lead]
    b1, b2, b3 = (padded[lead + k] & 0x3F for k in (1, 2, 3))
    cp = np.where(
        b0 < 0xE0, ((b0 & 0x1F) << 6) | b1,
        np.where(b0 < 0xF0, ((b0 & 0x0F) << 12) | (b1 << 6) | b2, ((b0 & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3),
    )
    lead_cls = np.empty(len(lead), np.uint8)
    bmp = cp < 0x10000
    lead_cls[bmp] = _bmp_classes()[cp[bmp]]
    if not bmp.all():
        astral, inverse = np.unique(cp[~bmp], return_inverse=True)
        lead_cls[~bmp] = np.array([_code_point_class(chr(c)) for c in astral.tolist()], np.uint8)[inverse]
    cls[lead] = lead_cls
    char_start = cls != CONTINUATION
    follow = np.flatnonzero(~char_start)
    for _ in range(3):  # a continuation byte takes its code point's class (at most 3 follow a lead)
        cls[follow] = cls[follow - 1]
    return cls, char_start


def _last_but(cls: np.ndarray, offsets: np.ndarray, skip: int) -> np.ndarray:
    """The class of the last code point before each byte that is not of class ``skip``, in its text (SPACE at a
    text's start)."""
    n = len(cls)
    known = cls.copy()
    first = offsets[:-1][offsets[:-1] < n]
    known[first] = np.where(cls[first] == skip, SPACE, cls[first])  # what comes before a text does not count
    last = np.maximum.accumulate(np.where(known != skip, np.arange(n), -1))
    out = np.full(n, SPACE, np.uint8)
    out[1:] = np.where(last[:-1] >= 0, known[np.maximum(last[:-1], 0)], SPACE)
    return out


def unspaced_starts(cls: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Where a token or a word starts because Chinese or Japanese has no spaces (and ``cls``'s ``MARK`` made
    ``WORD``, or ``CJK`` after one): at each such character, with the combining marks after it, and at a word
    character after one and the punctuation after it (``京（Beijing`` starts one at ``B``, as ``京Beijing`` does)."""
    mark = cls == MARK
    if mark.any():
        cls[mark] = np.where(_last_but(cls, offsets, MARK)[mark] == CJK, CJK, WORD)
    cjk = cls == CJK
    if not cjk.any():
        return np.zeros(len(cls), bool)
    return (cjk & ~mark) | ((cls == WORD) & (_last_but(cls, offsets, OTHER) == CJK))


def string_buffers(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(data, offsets)`` of a string array with no nulls: UTF-8 bytes and row offsets from 0."""
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        texts = texts.cast(pa.large_string())
    width = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    _, offsets_buf, data_buf = texts.buffers()
    offsets = np.frombuffer(offsets_buf, width)[texts.offset: texts.offset + len(texts) + 1].astype(np.int64)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    data = data[offsets[0]: offsets[-1]]
    return data, offsets - offsets[0]


def unit_bytes(data: np.ndarray, offsets: np.ndarray, unit: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Byte ``(starts, ends)`` of every token or word of the texts, and the count per text.

    A unit starts at a code point whose class differs from the one before it (for
    tokens: every OTHER code point starts one too); it ends at the next boundary: a
    space, the next unit's start, or the end of its text.
    """
    n = len(data)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, np.zeros(len(offsets) - 1, np.int64)
    cls, char_start = _classes(data)
    unspaced = unspaced_starts(cls, offsets)  # the same for tokens and words: each Chinese character is one
    before = np.empty_like(cls)  # class of the code point before each byte's
    before[0] = SPACE
    before[1:] = cls[:-1]
    prev = before.copy()
    prev[offsets[:-1][offsets[:-1] < n]] = SPACE  # a text's first character follows nothing
    if unit == "tokens":
        starts = (cls == OTHER) | ((cls == WORD) & (prev != WORD)) | unspaced
    else:
        starts = ((cls != SPACE) & (prev == SPACE)) | unspaced
    if char_start is not None:
        starts &= char_start
    # A unit ends where a boundary (a unit start, a space, a text's end) follows a non-space.
    boundary = np.zeros(n + 1, bool)
    boundary[:n] = starts | (cls == SPACE)
    if char_start is not None:
        boundary[:n] &= char_start
    boundary[offsets[1:]] = True
    boundary[0] = False
    boundary[:n] &= before != SPACE
    boundary[n] = cls[n - 1] != SPACE
    start_bytes = np.flatnonzero(starts)
    end_bytes = np.flatnonzero(boundary)
    counts = np.diff(np.searchsorted(start_bytes, offsets, side="left"))
    return start_bytes, end_bytes, counts


def windows(counts: np.ndarray, size: int, overlap: int,
            breaks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Chunks of ``size`` units advancing by ``size - overlap``: ``(text_of, index, first, stop)`` per chunk.

    ``first``/``stop`` are unit positions within the text. A text of at most ``size``
    units (or none) is one chunk; the last chunk of a text may be shorter, and still
    shares ``overlap`` units with the one before. ``breaks``: sorted positions, among all
    the texts' units, of units no chunk reaches across to the one before (``long_gaps``):
    each stretch between them is chunked as a text of its own, no overlap across.
    """
    if breaks is None or not len(breaks):
        return _even_windows(counts, size, overlap)
    counts = np.asarray(counts, np.int64)
    first_unit = np.cumsum(counts) - counts
    in_text = np.searchsorted(np.cumsum(counts), breaks, side="right")
    stretches = np.bincount(in_text, minlength=len(counts)) + 1
    stretch_text = np.repeat(np.arange(len(counts)), stretches)
    opens = np.cumsum(stretches) - stretches  # each text's first stretch
    begin = np.empty(len(stretch_text), np.int64)
    begin[opens] = first_unit
    begin[np.setdiff1d(np.arange(len(begin)), opens)] = breaks
    end = np.empty_like(begin)
    end[:-1] = begin[1:]
    end[np.r_[opens[1:], len(begin)] - 1] = first_unit + counts  # a text's last stretch ends with it
    of, _, first, stop = _even_windows(end - begin, size, overlap)
    text_of = stretch_text[of]
    shift = begin[of] - first_unit[text_of]
    per_text = np.bincount(text_of, minlength=len(counts))
    index = np.arange(len(text_of)) - (np.cumsum(per_text) - per_text)[text_of]
    return text_of, index, first + shift, stop + shift


def _even_windows(counts: np.ndarray, size: int, overlap: int):
    step = size - overlap
    per_text = np.where(counts <= size, 1, -(-(counts - size) // step) + 1).astype(np.int64)
    text_of = np.repeat(np.arange(len(counts)), per_text)
    index = np.arange(len(text_of)) - np.repeat(np.cumsum(per_text) - per_text, per_text)
    first = index * step
    stop = np.minimum(first + size, counts[text_of])
    return text_of, index, first, stop


def _char_starts(data: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Byte positions, from ``lo``, of the code points that start in ``data[lo:hi]``."""
    return np.flatnonzero((data[lo:hi] & 0xC0) != 0x80)


def cut_long(data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
             counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``unit_bytes``'s units with each one of more than ``LONG_UNIT_CHARS`` characters cut into units of
    ``PART_CHARS`` characters (at code point starts), and the counts per text that follow."""
    parts = []
    for unit in np.flatnonzero(ends - starts > LONG_UNIT_CHARS).tolist():  # at least as many bytes as characters
        chars = _char_starts(data, starts[unit], ends[unit])
        if len(chars) > LONG_UNIT_CHARS:
            parts.append((unit, starts[unit] + chars[::PART_CHARS]))
    if not parts:
        return starts, ends, counts
    new_starts, new_ends, done = [], [], 0
    for unit, cuts in parts:
        new_starts += [starts[done:unit], cuts]
        new_ends += [ends[done:unit], np.r_[cuts[1:], ends[unit]]]
        done = unit + 1
    counts = counts.copy()
    np.add.at(counts, np.searchsorted(np.cumsum(counts), [unit for unit, _ in parts], side="right"),
              [len(cuts) - 1 for _, cuts in parts])
    return (np.concatenate([*new_starts, starts[done:]]), np.concatenate([*new_ends, ends[done:]]), counts)


def long_gaps(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The units (positions among all the texts' units, for ``windows``' ``breaks``) that follow more than
    ``LONG_GAP_CHARS`` characters of spaces after the unit before them in their text."""
    first_units = (np.cumsum(counts) - counts)[counts > 0]
    after = np.flatnonzero(starts[1:] - ends[:-1] > LONG_GAP_CHARS) + 1  # bytes: at least the characters
    after = after[~np.isin(after, first_units)]
    return np.array([u for u in after.tolist() if len(_char_starts(data, ends[u - 1], starts[u])) > LONG_GAP_CHARS],
                    np.int64)


def sentence_spans(text: str, tokenizer) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (Punkt), those of Chinese and Japanese cut at their ``。！？``
    (``_cjk_sentences``: Punkt's models end a sentence only before a space)."""
    return _cjk_sentences.split(text, list(tokenizer.span_tokenize(text))) if text.strip() else []


def chunk_sentence_spans(text: str, tokenizer) -> list[tuple[int, int]]:
    """``sentence_spans``, a sentence of more than ``LONG_SENTENCE_CHARS`` characters cut into parts of at most
    ``SENTENCE_PART_CHARS``: after a space where it has one, else after a full-width clause mark (``，；、：``, in
    Chinese or Japanese), else between two whole characters (``unicode.whole_characters``): the units of a chunk of
    sentences."""
    spans = []
    for begin, end in sentence_spans(text, tokenizer):
        while end - begin > LONG_SENTENCE_CHARS:
            limit = begin + SENTENCE_PART_CHARS
            space = max(text.rfind(c, begin + SENTENCE_PART_CHARS // 2, limit) for c in " \n\t")
            cut = space if space > begin else _cjk_sentences.clause_end(text, begin + SENTENCE_PART_CHARS // 2, limit)
            if cut <= begin:
                cut = begin + len(whole_characters(text[begin:limit + 1], SENTENCE_PART_CHARS))
                cut = cut if cut > begin else limit  # one character of over 1,000 code points: cut it
            spans.append((begin, begin + len(text[begin:cut].rstrip())))
            while text[cut].isspace():  # (the sentence ends in a non-space, past the cut)
                cut += 1
            begin = cut
        spans.append((begin, end))
    return spans


def sentence_breaks(spans: list[list[tuple[int, int]]]) -> np.ndarray:
    """The sentences (positions among all the texts' sentences, for ``windows``' ``breaks``) that follow more than
    ``LONG_GAP_CHARS`` characters after the sentence before them in their text."""
    breaks, position = [], 0
    for text_spans in spans:
        breaks += [position + i for i in range(1, len(text_spans))
                   if text_spans[i][0] - text_spans[i - 1][1] > LONG_GAP_CHARS]
        position += len(text_spans)
    return np.array(breaks, np.int64)


@functools.cache
def punkt_tokenizer(language: str):
    import punkt

    return punkt.PunktSentenceTokenizer(punkt.load_model(language))
