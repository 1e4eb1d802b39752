"""A text's pieces as character spans, cut into windows of a model's pieces (``_model_windows``): numpy over one
text's (or one stretch of a long text's) pieces."""

from __future__ import annotations

import numpy as np

from operators.preprocess._chunk_units import LONG_UNIT_CHARS, PART_CHARS


def index_type(length: int):
    """The integer type that holds a position (or a count) up to ``length``."""
    return np.int32 if length < 2**31 else np.int64


def cut_long(spans: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The pieces' character spans with each one of more than ``LONG_UNIT_CHARS`` characters cut into parts of
    ``PART_CHARS``, and the piece each span is of (None where no piece is cut: each span is its own piece). Only
    the long pieces' parts are computed apart: arrays of the whole text's length each took 8 bytes a piece."""
    long_at = np.flatnonzero(spans[:, 1] - spans[:, 0] > LONG_UNIT_CHARS)
    if not len(long_at):
        return spans, None
    counts = -(-(spans[long_at, 1] - spans[long_at, 0]) // PART_CHARS)  # the parts of each long piece
    parts = np.ones(len(spans), index_type(len(spans) + int(counts.sum())))
    parts[long_at] = counts
    origin = np.repeat(np.arange(len(spans), dtype=parts.dtype), parts)
    del parts
    cut = spans[origin]
    within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)  # a part's place in its piece
    rows = np.repeat(long_at + np.cumsum(counts - 1) - (counts - 1), counts) + within
    cut[rows, 0] = np.repeat(spans[long_at, 0], counts) + within * PART_CHARS
    cut[rows, 1] = np.minimum(cut[rows, 0] + PART_CHARS, np.repeat(spans[long_at, 1], counts))
    return cut, origin


def windows(spans: np.ndarray, size: int, overlap: int, breaks: np.ndarray,
             points: tuple[np.ndarray, np.ndarray] | None = None, first: int = 0,
             final: bool = True) -> tuple[list[tuple[int, int]], int]:
    """[first, stop) piece ranges of one text's windows from ``first``: at most ``size`` pieces each, whole words
    where a word fits, about ``overlap`` pieces shared by neighbours; none reaches across a piece of ``breaks``
    (sorted) to the one before it. ``points`` (``_cjk_sentences.cut_points``, Chinese or Japanese text): a window
    ends at a sentence end (or a gap) where one falls in its second half, else at a clause's end, and starts at
    either. Unless ``final`` (more of the text's pieces follow ``spans``), they stop before the first window that
    those could change: one that would reach the last piece. Also where the next window starts."""
    n = len(spans)
    starts_word = np.ones(n, bool)
    starts_word[1:] = spans[1:, 0] > spans[:-1, 1]  # a gap (a space, a dropped character) before the piece
    preferred = None
    if points is not None:
        sentence_at = np.isin(spans[:, 0], points[0])
        preferred = np.flatnonzero(starts_word | sentence_at)
        starts_word |= sentence_at | np.isin(spans[:, 0], points[1])
    word_starts = np.flatnonzero(starts_word)
    found = []
    for end in [*breaks[breaks > first].tolist(), n]:  # each stretch between breaks, on its own
        while True:
            if end - first <= size:
                if end == n and not final:
                    return found, first
                found.append((first, end))
                break
            limit = first + size  # the piece after the longest window
            before = word_starts[np.searchsorted(word_starts, limit, side="right") - 1]  # last word start <= limit
            stop = int(before) if before > first else limit  # a word longer than a chunk is cut between pieces
            if preferred is not None:
                sentence = int(preferred[np.searchsorted(preferred, limit, side="right") - 1])
                stop = sentence if sentence > first + size // 2 else stop
            found.append((first, stop))
            low = max(first + 1, stop - overlap)
            after = word_starts[np.searchsorted(word_starts, low)] if low <= word_starts[-1] else stop
            first = int(min(after, stop))
        first = end
    return found, first
