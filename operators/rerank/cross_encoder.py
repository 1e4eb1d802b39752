"""Cross-encoder reranking: the query and each candidate read together by one model."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from pydantic import Field

from operators.models.batching import forward_batch_size
from operators.rerank._reranker import RerankParams, Reranker


class CrossEncoderRerank(Reranker):
    """Rerank each query's top candidates with a sentence-transformers CrossEncoder.

    Any CrossEncoder checkpoint works: a model trained by ``tessera train``
    (referenced by its name in ``$TESSERA_HOME/models``), or a folder a user points
    at. Pairs longer than ``max_length`` tokens are truncated by the tokenizer. The
    score is the model's raw output (a logit), so scores from different queries are
    comparable and ``score`` keeps its meaning across steps.

    Usage::

        CrossEncoderRerank({"model": "tessera-scifact-ce", "n": 100})(first_stage_results)
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
        predict_batch_size: int | None = Field(None, gt=0, description="Pairs per forward pass (default: 16 on CPU, "
                                               "128 on a GPU; operators.models.batching).")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model = None

    def setup(self) -> None:
        from operators.models import load_cross_encoder

        self.model = load_cross_encoder(self.params.model, device=self.params.device,
                                        max_length=self.params.max_length)

    def cache_identity(self) -> dict[str, Any]:
        from operators.models.fingerprint import weights_fingerprint

        return {**super().cache_identity(), "weights": weights_fingerprint(self.params.model)}

    def score_texts(self, query: str, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros(0)
        import torch

        batch = forward_batch_size(self.params.predict_batch_size, self.model)
        scores = self.model.predict([(query, text) for text in texts], batch_size=batch,
                                    activation_fn=torch.nn.Identity(), show_progress_bar=False, convert_to_numpy=True)
        return np.asarray(scores, dtype=np.float64).reshape(-1)
