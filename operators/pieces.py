"""Texts as bags of space-separated pieces, so each distinct piece is tokenized once.

Why: at ingestion scale, tokenizing every text in full was most of the time (issue 33's
profile). The tokenizers indexing uses never look across an ASCII space: bm25s's
``\\w\\w+`` splitter (after ``str.lower``, whose one context rule, Greek final sigma, stops
at a space too) and BERT's normaliser + pre-tokeniser + WordPiece (the static embedder). A
text's tokens are therefore its pieces' tokens, in order, and a bag-of-tokens (BM25 term
counts, a static model's mean of token vectors) is the texts x pieces count matrix times a
pieces x tokens one. A 5,000-passage shard has about 700K pieces but some 60K distinct ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import scipy.sparse as sp


@dataclass
class Pieces:
    """The distinct pieces of a list of texts and how often each text holds each one."""

    distinct: list[str]
    counts: sp.csr_matrix  # texts x distinct pieces, int32 occurrences

    @classmethod
    def of(cls, texts: pa.Array | pa.ChunkedArray | Sequence[str]) -> "Pieces":
        """Split on ASCII spaces in Arrow (nulls are empty texts)."""
        if not isinstance(texts, (pa.Array, pa.ChunkedArray)):
            texts = pa.array(texts, pa.string())
        if isinstance(texts, pa.ChunkedArray):
            texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
        lists = pc.split_pattern(pc.fill_null(texts, ""), " ")
        rows = pc.list_parent_indices(lists).to_numpy()
        encoded = pc.list_flatten(lists).dictionary_encode()
        distinct = encoded.dictionary.to_pylist()
        cols = encoded.indices.to_numpy(zero_copy_only=False)
        counts = sp.csr_matrix((np.ones(len(cols), np.int32), (rows, cols)), shape=(len(texts), len(distinct)))
        counts.sum_duplicates()
        return cls(distinct=distinct, counts=counts)

    def token_counts(self, piece_of: np.ndarray, token: np.ndarray, width: int) -> sp.csr_matrix:
        """Texts x ``width`` token counts, from every token of the distinct pieces: its piece's index
        and its column (in ``[0, width)``)."""
        piece_tokens = sp.csr_matrix((np.ones(len(token), np.int32), (piece_of, token)),
                                     shape=(len(self.distinct), width))
        return (self.counts @ piece_tokens).tocsr()


class TokenCache:
    """A tokenizer of distinct pieces that remembers the token ids of up to ``limit`` pieces.

    Why: most distinct pieces of a batch (common words with their punctuation) were in the
    batches before; with the cache a batch tokenizes only the pieces new to it. ``tokenize`` maps
    distinct pieces to (piece index, token id) of each of their tokens, in piece order."""

    def __init__(self, tokenize: Callable[[list[str]], tuple[np.ndarray, np.ndarray]], limit: int = 1_000_000):
        self.tokenize = tokenize
        self.limit = limit
        self.slots: dict[str, int] = {}  # piece -> its slot
        self.starts = np.zeros(0, np.int64)  # per slot, its first token in ``ids``
        self.lengths = np.zeros(0, np.int64)
        self.ids = np.zeros(0, np.int32)

    def __call__(self, distinct: list[str]) -> tuple[np.ndarray, np.ndarray]:
        slots = np.fromiter((self.slots.get(p, -1) for p in distinct), np.int64, count=len(distinct))
        new = np.flatnonzero(slots < 0)
        owner, ids = self.tokenize([distinct[i] for i in new.tolist()])
        owner = new[owner]
        old = np.flatnonzero(slots >= 0)
        lengths = self.lengths[slots[old]]
        ends = np.cumsum(lengths)
        at = np.repeat(self.starts[slots[old]] - (ends - lengths), lengths) + np.arange(ends[-1] if len(ends) else 0)
        self._remember(distinct, new, owner, ids)
        return np.concatenate([np.repeat(old, lengths), owner]), np.concatenate([self.ids[at], ids])

    def _remember(self, distinct: list[str], new: np.ndarray, owner: np.ndarray, ids: np.ndarray) -> None:
        room = min(len(new), self.limit - len(self.slots))
        if room <= 0:
            return
        counts = np.bincount(np.searchsorted(new, owner), minlength=len(new))[:room]
        kept = int(counts.sum())
        for piece in (distinct[i] for i in new[:room].tolist()):
            self.slots[piece] = len(self.slots)
        self.starts = np.concatenate([self.starts, len(self.ids) + np.cumsum(counts) - counts])
        self.lengths = np.concatenate([self.lengths, counts])
        self.ids = np.concatenate([self.ids, ids[:kept].astype(np.int32)])
