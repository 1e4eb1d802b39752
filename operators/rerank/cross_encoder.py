"""Cross-encoder reranking: the query and each candidate read together by one model."""

from __future__ import annotations

from typing import Any, Literal, Sequence

import numpy as np
from pydantic import Field

from operators.errors import FlowCancelled, see_docs
from operators.models.batching import forward_batch_size
from operators.models.fingerprint import LoadsParamsModel
from operators.models.precision import Precision
from operators.rerank.base import RerankParams, Reranker
from operators.rerank._windows import best_per_candidate, windowed_pairs


class CrossEncoderReranker(LoadsParamsModel, Reranker):
    """Rerank each query's top candidates with a sentence-transformers CrossEncoder.

    Any CrossEncoder checkpoint works: a model trained by ``tessera train``
    (referenced by its name in ``$TESSERA_HOME/models``), or a folder a user points
    at. Pairs longer than ``max_length`` tokens are truncated by the tokenizer, or, with
    ``long_texts: max_window``, long candidates are read in overlapping windows (title
    in front of each) and score their best window (``operators.rerank._windows``). The
    score is the model's raw output (a logit), so scores from different queries are
    comparable and ``score`` keeps its meaning across steps.

    Usage::

        CrossEncoderReranker({"model": "tessera-scifact-ce", "n": 100})(first_stage_results)
    """

    name = "rerank.cross_encoder"
    aliases = ("cross_encoder", "cross-encoder")

    class Params(RerankParams):
        model: str = Field("tessera-cross-encoder", description="CrossEncoder reference: a model trained by "
                           "`tessera train` (by name), a local checkpoint folder, or a Hugging Face id already in "
                           "the local cache.")
        device: str | None = Field(None, description="Torch device ('cpu', 'cuda'); default: the GPU if any.")
        max_length: int | None = Field(None, gt=8, description="Token limit per (query, text) pair; longer pairs "
                                       "are truncated. Default: the checkpoint's own limit (a larger value "
                                       "is logged: the model was not fine-tuned on those positions).")
        long_texts: Literal["truncate", "max_window"] = Field(
            "truncate", description="A candidate longer than max_length beside the query: 'truncate' scores its "
            "beginning; 'max_window' scores overlapping windows of it (the title in front of each) and keeps "
            f"the best (MaxP; more pairs to score): see {see_docs('results')}.")
        window_stride: float = Field(0.5, gt=0, le=1, description="With max_window: the step between window "
                                     "starts, as a fraction of the window (0.5: windows overlap by half).")
        max_windows: int = Field(32, gt=0, description="With max_window: at most this many windows per candidate "
                                 "(about 3,700 tokens at 256 beside a short query); the rest of a longer text is "
                                 "not read. Bounds what one huge candidate costs.")
        predict_batch_size: int | None = Field(None, gt=0, description="Pairs per forward pass (default: 16 on CPU, "
                                               "128 on a GPU; operators.models.batching).")
        dtype: Precision = Field("float32", description="Precision of the weights: float16 or bfloat16 for a GPU, "
                                 "where they halve each forward pass; scores are handed on as float32.")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model = None
        self._fast = None  # a FastTokenEncoder where it tokenizes the pairs as the model does

    def setup(self) -> None:
        from operators.models import load_cross_encoder
        from operators.models.fast_tokens import PAIR_PROBES, FastTokenEncoder

        self.model = load_cross_encoder(self.params.model, device=self.params.device,
                                        max_length=self.params.max_length, dtype=self.params.dtype)
        self._fast = FastTokenEncoder.of(self.model, PAIR_PROBES)

    def score_texts(self, query: str, texts: Sequence[str]) -> np.ndarray:
        pairs, owners = self._pairs(query, texts)
        return self._per_candidate(self._predict(pairs), owners, len(texts))

    def score_queries(self, queries: Sequence[str], texts: Sequence[Sequence[str]]) -> list[np.ndarray | Exception]:
        """Every query's pairs in one ``predict``. Scored a query at a time, 100 candidates fill one short forward
        pass each, which left an H200 at half the pairs/s of full batches (benchmarks/gpu/RESULTS.md). If the
        batched call fails, each query is scored alone, so a failure stays with the query that causes it."""
        pairs: list[tuple[str, str]] = []
        spans, owners = [], []
        for query, candidates in zip(queries, texts):
            query_pairs, query_owners = self._pairs(query, candidates)
            spans.append((len(pairs), len(pairs) + len(query_pairs)))
            pairs.extend(query_pairs)
            owners.append(query_owners)
        try:
            scores = self._predict(pairs)
        except FlowCancelled:
            raise
        except Exception:  # noqa: BLE001  (each query alone: the failure policy decides per query)
            return super().score_queries(queries, texts)
        return [self._per_candidate(scores[start:end], owned, len(candidates))
                for (start, end), owned, candidates in zip(spans, owners, texts)]

    def _pairs(self, query: str, texts: Sequence[str]) -> tuple[list[tuple[str, str]], np.ndarray | None]:
        """The (query, text) pairs to score, and with ``max_window`` the candidate each window belongs to."""
        if self.params.long_texts == "max_window" and texts:
            return windowed_pairs(self.model.tokenizer, query, texts, self.model.max_seq_length,
                                  self.params.window_stride, self.params.max_windows)
        return [(query, text) for text in texts], None

    def _predict(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0)
        batch = forward_batch_size(self.params.predict_batch_size, self.model)
        if self._fast is not None:
            scores = self._fast.scores(pairs, batch)
        else:
            import torch

            scores = self.model.predict(pairs, batch_size=batch, activation_fn=torch.nn.Identity(),
                                        show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(scores, dtype=np.float64).reshape(-1)

    @staticmethod
    def _per_candidate(scores: np.ndarray, owners: np.ndarray | None, count: int) -> np.ndarray:
        return scores if owners is None else best_per_candidate(scores, owners, count)
