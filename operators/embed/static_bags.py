"""A static (model2vec) sentence-transformers model's encode, over bags of distinct pieces.

Why: such a model's vector is the mean of its tokens' rows of one table, so the cost is all
in tokenizing, and sentence-transformers tokenizes every text in full (issue 33's profile:
most of the ingestion time). Here each distinct space-separated piece of a batch is tokenized
once (``operators.pieces``), the texts x tokens count matrix times the table gives the sums,
and the mean and the model's ``Normalize`` follow. A text longer than the tokenizer's truncation
(whole SciFact abstracts; chunks are shorter) is tokenized in full by the model's truncating
tokenizer and averaged the same way. Sums and means are float32 over the table's values: the
model's own ``encode`` on a float16 table (model2vec's ``distill`` saves float16) sums in float16,
cosine 0.9996-1.0 to these vectors (docs/results.md, static section). The vectors are
``model.float().encode``'s to float32 rounding (``tests/operators/embed/test_static_model.py`` and
``test_static_bags_scifact.py``).
"""

from __future__ import annotations

import numpy as np

from operators.pieces import Pieces, TokenCache

#: Distinct pieces joined into one text per tokenizer call (blocks are tokenized in parallel).
PIECES_PER_CALL = 4096


class StaticBags:
    """Encode texts as a StaticEmbedding model would, tokenizing distinct pieces only."""

    def __init__(self, truncating, table, tokenizer, max_length: int | None, normalized: bool):
        self.truncating = truncating  # the model's own tokenizer, which cuts a text at max_length tokens
        self.table = table  # float32 torch tensor, tokens x dim
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.normalized = normalized
        self.cache = TokenCache(self._tokens)

    @classmethod
    def of(cls, model) -> "StaticBags | None":
        """For a model that is a StaticEmbedding, alone or followed by Normalize; else None."""
        from sentence_transformers.sentence_transformer.modules import Normalize
        from tokenizers import Tokenizer

        from operators.models.batching import is_static

        if not is_static(model):
            return None
        modules = list(model)
        if not all(isinstance(m, Normalize) for m in modules[1:]):
            return None
        static = modules[0]
        truncation = static.tokenizer.truncation
        tokenizer = Tokenizer.from_str(static.tokenizer.to_str())  # a copy: pieces are never truncated
        tokenizer.no_truncation()
        tokenizer.no_padding()
        table = static.embedding.weight.detach().cpu().float()
        return cls(static.tokenizer, table, tokenizer, truncation["max_length"] if truncation else None,
                   len(modules) > 1)

    def _tokens(self, distinct: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(piece index, token id) of every token of the distinct pieces. The pieces go to the
        tokenizer joined by spaces, a block at a time (one Encoding per piece costs more in Python
        than the tokenizing), and each token goes to the piece its first character falls in."""
        blocks = range(0, len(distinct), PIECES_PER_CALL)
        encodings = self.tokenizer.encode_batch([" ".join(distinct[i:i + PIECES_PER_CALL]) for i in blocks],
                                                add_special_tokens=False)
        owners, ids = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
        for first, encoding in zip(blocks, encodings):
            lengths = np.fromiter((len(p) for p in distinct[first:first + PIECES_PER_CALL]), np.int64)
            starts = np.cumsum(lengths + 1) - lengths - 1  # each piece's first character in the joined text
            offsets = np.fromiter((a for a, _ in encoding.offsets), np.int64, count=len(encoding))
            owners.append(first + np.searchsorted(starts, offsets, side="right") - 1)
            ids.append(np.asarray(encoding.ids, np.int64))
        return np.concatenate(owners), np.concatenate(ids)

    def _sums(self, counts) -> np.ndarray:
        """counts (texts x tokens, CSR) times the token table: torch's multi-threaded embedding_bag."""
        import torch

        return torch.nn.functional.embedding_bag(
            torch.from_numpy(counts.indices.astype(np.int64)), self.table,
            torch.from_numpy(counts.indptr[:-1].astype(np.int64)), mode="sum",
            per_sample_weights=torch.from_numpy(counts.data.astype(np.float32))).numpy()

    def _truncated_means(self, texts: list[str]) -> np.ndarray:
        """Float32 means of the token rows of texts cut at ``max_length`` tokens, as the model cuts them."""
        import torch

        encodings = self.truncating.encode_batch(texts, add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), np.int64, count=len(encodings))
        ids = np.concatenate([np.asarray(e.ids, np.int64) for e in encodings])
        return torch.nn.functional.embedding_bag(
            torch.from_numpy(ids), self.table, torch.from_numpy(np.cumsum(lengths) - lengths), mode="mean").numpy()

    def encode(self, texts: list[str], normalize: bool) -> np.ndarray:
        """(n, dim) float32 vectors: the mean of each text's token vectors, L2-normalised when the
        model or ``normalize`` says so (an empty text stays the zero vector, as in the model)."""
        pieces = Pieces.of(texts)
        counts = pieces.token_counts(*self.cache(pieces.distinct), self.table.shape[0])
        lengths = np.asarray(counts.sum(axis=1)).ravel()
        vectors = self._sums(counts)
        vectors /= np.maximum(lengths, 1)[:, None]
        if self.max_length is not None and (lengths > self.max_length).any():
            long = np.flatnonzero(lengths > self.max_length)
            vectors[long] = self._truncated_means([texts[i] for i in long])
        if self.normalized or normalize:
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors /= np.maximum(norms, 1e-12)
        return vectors
