"""Where the units of a text start and end, for the chunker, vectorised with numpy.

A unit is a *token* (a run of word characters, or one other non-space character:
Python's ``\\w+|[^\\w\\s]`` with combining marks counted as word characters, so
``naïve``, ``नमस्ते`` and ``東京`` are one token and ``(``, ``,``, ``😀`` are tokens of
their own), a *word* (a run of non-whitespace, like ``str.split()``), or a
*sentence* (Punkt, from the ``punkt`` package, whose models ship in the wheel).

Tokens and words are found without a Python loop over characters: the UTF-8 bytes
of a whole batch are decoded to code points with numpy, each code point gets a class
(space, word, other) from a lookup table built once, and unit boundaries are where
the class changes. Sentences go through Punkt one text at a time.
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np
import pyarrow as pa

SPACE, WORD, OTHER, CONTINUATION = 0, 1, 2, 3
#: Texts are processed in blocks of about this many UTF-8 bytes, to bound memory.
BLOCK_BYTES = 1 << 20


def char_class(ch: str) -> int:
    if ch.isspace():
        return SPACE
    if ch.isalnum() or ch == "_" or unicodedata.category(ch).startswith("M"):
        return WORD
    return OTHER


@functools.cache
def _bmp_classes() -> np.ndarray:
    return np.array([char_class(chr(c)) for c in range(0x10000)], dtype=np.uint8)


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
        lead_cls[~bmp] = np.array([char_class(chr(c)) for c in astral.tolist()], np.uint8)[inverse]
    cls[lead] = lead_cls
    char_start = cls != CONTINUATION
    follow = np.flatnonzero(~char_start)
    for _ in range(3):  # a continuation byte takes its code point's class (at most 3 follow a lead)
        cls[follow] = cls[follow - 1]
    return cls, char_start


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
    before = np.empty_like(cls)  # class of the code point before each byte's
    before[0] = SPACE
    before[1:] = cls[:-1]
    prev = before.copy()
    prev[offsets[:-1][offsets[:-1] < n]] = SPACE  # a text's first character follows nothing
    if unit == "tokens":
        starts = (cls == OTHER) | ((cls == WORD) & (prev != WORD))
    else:  # words
        starts = (cls != SPACE) & (prev == SPACE)
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


def windows(counts: np.ndarray, size: int, overlap: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Chunks of ``size`` units advancing by ``size - overlap``: ``(text_of, index, first, stop)`` per chunk.

    ``first``/``stop`` are unit positions within the text. A text of at most ``size``
    units (or none) is one chunk; the last chunk of a text may be shorter, and still
    shares ``overlap`` units with the one before.
    """
    step = size - overlap
    per_text = np.where(counts <= size, 1, -(-(counts - size) // step) + 1).astype(np.int64)
    text_of = np.repeat(np.arange(len(counts)), per_text)
    index = np.arange(len(text_of)) - np.repeat(np.cumsum(per_text) - per_text, per_text)
    first = index * step
    stop = np.minimum(first + size, counts[text_of])
    return text_of, index, first, stop


def sentence_spans(text: str, tokenizer) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text`` (Punkt)."""
    return list(tokenizer.span_tokenize(text)) if text.strip() else []


@functools.cache
def punkt_tokenizer(language: str):
    import punkt

    return punkt.PunktSentenceTokenizer(punkt.load_model(language))
