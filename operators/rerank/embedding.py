"""Bi-encoder reranking: cosine similarity of dense embeddings of the query and each candidate."""

from __future__ import annotations

from typing import Any, Literal, Sequence

import numpy as np
from pydantic import Field

from operators.errors import FlowCancelled
from operators.models import DEFAULT_ENCODER
from operators.models.batching import forward_batch_size
from operators.models.fingerprint import LoadsParamsModel
from operators.rerank.base import RerankParams, Reranker


class EmbeddingReranker(LoadsParamsModel, Reranker):
    """Rerank each query's top candidates by cosine similarity of sentence-transformers embeddings.

    Any sentence-transformers bi-encoder works (the packaged all-MiniLM-L6-v2 by
    default, a local folder, a model trained by ``tessera train``). The candidates are
    always embedded here, from the text (with the title on its own first line, like
    every reranker), so the ranking does not depend on which index or encoder produced
    them. Texts longer than the model's ``max_seq_length`` are truncated by its
    tokenizer. A batch embeds all its queries in one encode call and all its
    candidates in another, which is what makes this cheaper than a cross-encoder; if
    that batched call fails, each query is retried alone so a failure only degrades
    the query that caused it. Models such as E5 or BGE expect prefixes: set
    ``query_prompt``/``document_prompt`` (``"query: "``/``"passage: "``).

    Usage::

        EmbeddingReranker({"n": 50})(first_stage_results)   # score = cosine(query, title + text)
    """

    name = "rerank.embedding"
    aliases = ("embedding_rerank", "bi_encoder_rerank")

    class Params(RerankParams):
        model: str = Field(DEFAULT_ENCODER, min_length=1, description="Sentence-transformers model: a packaged "
                           "name (all-MiniLM-L6-v2), a local model folder, or a model trained by `tessera train`.")
        query_prompt: str | None = Field(None, description="Prefix added to the query before embedding "
                                         "(e.g. 'query: ' for E5); null adds none.")
        document_prompt: str | None = Field(None, description="Prefix added to every candidate text before "
                                            "embedding (e.g. 'passage: ' for E5); null adds none.")
        encode_batch_size: int | None = Field(None, gt=0, le=4096, description="Texts per forward pass (default: "
                                              "16 on CPU, 128 on a GPU; operators.models.batching).")
        backend: Literal["torch", "onnx", "onnx-int8"] = Field(
            "torch", description="Encoder backend: torch, or onnx / onnx-int8 on CPU (ONNX Runtime).")
        device: str | None = Field(None, description="Torch device ('cpu', 'cuda'); default: the GPU if any.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model = None

    def setup(self) -> None:
        from operators.models import load_sentence_transformer

        self.model = load_sentence_transformer(self.params.model, device=self.params.device,
                                               backend=self.params.backend)

    def _encode(self, texts: Sequence[str], prompt: str | None) -> np.ndarray:
        """Unit-length float32 vectors of ``texts`` (with ``prompt`` prepended), one row each."""
        if prompt:
            texts = [prompt + text for text in texts]
        batch = forward_batch_size(self.params.encode_batch_size, self.model)
        vectors = self.model.encode(list(texts), batch_size=batch,
                                    normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def score_texts(self, query: str, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        query_vector = self._encode([query], self.params.query_prompt)[0]
        return (self._encode(texts, self.params.document_prompt) @ query_vector).astype(np.float64)

    def score_queries(self, queries: Sequence[str], texts: Sequence[Sequence[str]]) -> list[np.ndarray | Exception]:
        """Embed every distinct query and every distinct candidate of the batch once, then take dot products."""
        distinct_queries = list(dict.fromkeys(queries))
        distinct_texts = list(dict.fromkeys(text for candidates in texts for text in candidates))
        try:
            query_vectors = self._encode(distinct_queries, self.params.query_prompt)
            text_vectors = self._encode(distinct_texts, self.params.document_prompt) if distinct_texts else None
        except FlowCancelled:
            raise
        except Exception:  # noqa: BLE001  (one bad query must not degrade the others: retry each alone)
            return super().score_queries(queries, texts)
        query_row = {query: i for i, query in enumerate(distinct_queries)}
        text_row = {text: i for i, text in enumerate(distinct_texts)}
        results: list[np.ndarray | Exception] = []
        for query, candidates in zip(queries, texts):
            if not candidates:
                results.append(np.zeros(0))
                continue
            rows = text_vectors[[text_row[text] for text in candidates]]
            results.append((rows @ query_vectors[query_row[query]]).astype(np.float64))
        return results
