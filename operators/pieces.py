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

    def tokens(self, tokenize: Callable[[list[str]], list[Sequence]], vocab: dict | None = None):
        """(texts x tokens count matrix, vocabulary): ``tokenize`` maps the distinct pieces to their
        tokens (hashable values); ``vocab`` (token -> column, extended in place with new tokens in
        order of first sight, as bm25s numbers them) fixes the columns, else a fresh one is made."""
        vocab = {} if vocab is None else vocab
        per_piece = tokenize(self.distinct)
        lengths = np.fromiter((len(t) for t in per_piece), np.int64, count=len(per_piece))
        cols = np.fromiter((vocab.setdefault(t, len(vocab)) for toks in per_piece for t in toks), np.int64,
                           count=int(lengths.sum()))
        return self.token_counts(np.repeat(np.arange(len(per_piece)), lengths), cols, len(vocab)), vocab

    def token_counts(self, piece_of: np.ndarray, token: np.ndarray, width: int) -> sp.csr_matrix:
        """Texts x ``width`` token counts, from every token of the distinct pieces: its piece's index
        and its column (in ``[0, width)``)."""
        piece_tokens = sp.csr_matrix((np.ones(len(token), np.int32), (piece_of, token)),
                                     shape=(len(self.distinct), width))
        return (self.counts @ piece_tokens).tocsr()
