"""Overlapping token windows of long candidates, so a cross-encoder reads all of each text.

A cross-encoder truncates a (query, text) pair at its token limit, so the end of a long
abstract is never read. With windows, every candidate is cut into overlapping pieces that
fit beside the query (each piece keeps the candidate's title in front), every piece is
scored, and the candidate's score is the best of its pieces: MaxP, from Dai and Callan,
"Deeper Text Understanding for IR with Contextual Neural Language Modeling" (SIGIR 2019).
Pieces are cut at token boundaries and taken from the original string through the fast
tokenizer's character offsets, so no text is re-spelled by decoding.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from operators.tables import document_text

#: Fewer free tokens than this beside the query and title: one window of this size
#: anyway (the tokenizer then truncates the pair, as without windows).
MIN_WINDOW_TOKENS = 32


def windowed_pairs(tokenizer, query: str, texts: Sequence[str], max_length: int, stride: float,
                   max_windows: int | None = None) -> tuple[list[tuple[str, str]], np.ndarray]:
    """(query, window) pairs for every candidate and the candidate index of each pair.

    ``texts`` may be the ``TitledTexts`` a reranker builds (the title is repeated in front of
    every window) or plain strings, as through Serve (windows over the whole string).
    ``stride`` is the step between window starts as a fraction of the window (0.5: each
    token is read in two windows). ``max_windows`` bounds the pairs one very long candidate
    adds; the text past its last window is not read.
    """
    titles = getattr(texts, "titles", None) or [""] * len(texts)
    bodies = getattr(texts, "bodies", None) or list(texts)
    free = max_length - tokenizer.num_special_tokens_to_add(pair=True) - _count(tokenizer, query)
    pairs: list[tuple[str, str]] = []
    owners: list[int] = []
    for index, (title, body) in enumerate(zip(titles, bodies)):
        prefix = document_text("", title)  # the title and its newline, joined as the candidate's own text is
        room = max(MIN_WINDOW_TOKENS, free - _count(tokenizer, prefix))
        for window in _windows(tokenizer, body, room, stride, max_windows):
            pairs.append((query, prefix + window))
            owners.append(index)
    return pairs, np.asarray(owners, dtype=np.int64)


def best_per_candidate(scores: np.ndarray, owners: np.ndarray, count: int) -> np.ndarray:
    """The highest window score of each of ``count`` candidates."""
    best = np.full(count, -np.inf)
    np.maximum.at(best, owners, np.asarray(scores, dtype=np.float64).reshape(-1))
    return best


def _count(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]) if text else 0


def _windows(tokenizer, body: str, room: int, stride: float, limit: int | None) -> list[str]:
    spans = tokenizer(body, add_special_tokens=False, return_offsets_mapping=True, verbose=False)["offset_mapping"]
    if len(spans) <= room:
        return [body]
    step = max(1, int(room * stride))
    windows = []
    for start in range(0, len(spans), step):
        end = min(start + room, len(spans))
        windows.append(body[spans[start][0]:spans[end - 1][1]])
        if end == len(spans) or len(windows) == limit:
            break
    return windows
