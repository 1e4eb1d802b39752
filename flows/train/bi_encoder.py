"""Fine-tune the dense (bi-encoder) retriever on mined (query, positive, hard negatives) examples.

``sentence_transformers.losses.MultipleNegativesRankingLoss``: each query's positive
competes with every other positive and hard negative of the batch (in-batch
negatives plus ``negatives`` mined ones per example). In-domain fine-tuning of
MiniLM this way (flows/train/recipes/train.yaml) is what ``dense_ft`` measures in docs/results.md.

The result is a normal sentence-transformers folder (same pooling and
normalisation as the base), so ``embed.sentence_transformer``, ``retrieve.dense``
and ingestion (``index_settings.encoder``) load it by name. It is saved with the
base's own ``max_seq_length``, whatever length training truncated to.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from flows.train import _loop
from operators.errors import see_docs

if TYPE_CHECKING:
    from flows.train.resume import EpochState


class BiEncoderParams(BaseModel):
    """Hyperparameters of bi-encoder fine-tuning."""

    model_config = ConfigDict(extra="forbid")

    base: str = Field("all-MiniLM-L6-v2", description="Model to start from: a reference operators.models resolves, or "
                      "another kind this run trains (bi-encoder: <output>/<prefix>-bi-encoder, trained first).")
    epochs: int = Field(2, gt=0, description="Passes over the examples.")
    batch_size: int = Field(8, gt=1, description="Examples per step; the other examples' documents are in-batch "
                            "negatives. A small set needs the steps: on SciFact a small batch beat a large one, "
                            f"see {see_docs('results')}.")
    lr: float = Field(3e-5, gt=0, description="Peak learning rate (linear warmup, then linear decay).")
    warmup_ratio: float = Field(0.1, ge=0, lt=1, description="Share of the steps spent warming up.")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay.")
    max_length: int = Field(256, gt=8, description="Tokens per text during training (the saved model keeps the "
                            "base's limit).")
    negatives: int = Field(1, ge=0, description="Mined hard negatives per example.")
    scale: float = Field(20.0, gt=0, description="Inverse temperature of the cosine similarities.")


def train_bi_encoder(examples: list[dict[str, Any]], output_dir: str | Path, params: BiEncoderParams, *,
                     seed: int = 0, max_steps: int | None = None, progress: bool = True,
                     resume: EpochState | None = None) -> dict[str, Any]:
    """Train and save to ``output_dir``; returns the stats. ``resume``: as for the cross-encoder."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from sentence_transformers.util import batch_to_device

    from operators.models import resolve_model_path

    started = time.perf_counter()
    _loop.seed_everything(seed)
    model = SentenceTransformer(str(resolve_model_path(params.base)), local_files_only=True,
                                device=None if torch.cuda.is_available() else "cpu")
    saved_length = model.max_seq_length
    model.max_seq_length = params.max_length
    loss_fn = MultipleNegativesRankingLoss(model, scale=params.scale)

    def loss_of(columns: list[list[str]]):
        return loss_fn([batch_to_device(model.preprocess(column), model.device) for column in columns], None)

    state = resume.load() if resume is not None else None
    losses = _loop.fit(model, loss_of, examples, model.parameters(), params, seed=seed, max_steps=max_steps,
                       desc="bi-encoder", progress=progress, resume=resume, state=state)
    model.max_seq_length = saved_length
    model.save(str(output_dir))
    resumed = {"resumed_from": resume.resumed_from} if resume is not None and resume.resumed_from else {}
    return _loop.summary(losses, started, **resumed)
