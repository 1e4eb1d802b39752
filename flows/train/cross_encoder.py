"""Fine-tune a cross-encoder reranker on mined (query, positive, hard negatives) examples.

The model starts from a sentence-transformers bi-encoder (the packaged MiniLM by
default): its transformer reads query and document together and a new one-logit
head scores the pair. The loss is contrastive, not pointwise: for each query the
positive competes with its hard negatives (and ``in_batch_negatives`` other
queries' positives) in one softmax (``sentence_transformers.cross_encoder.losses.
MultipleNegativesRankingLoss``). Pointwise binary cross-entropy on 1:7 positives to
negatives collapsed to the class prior on SciFact (docs/results.md), because a new
head learns "say no" long before it learns relevance.

The result is a plain ``CrossEncoder`` folder, loaded by
``operators.models.load_cross_encoder`` and ``rerank.cross_encoder`` by name.
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


class FollowUpSchedule(BaseModel):
    """A further pass over the same examples after the main schedule, with a fresh optimiser and its own
    warmup and decay, usually at a lower rate."""

    model_config = ConfigDict(extra="forbid")

    epochs: int = Field(1, gt=0, description="Passes over the examples.")
    lr: float = Field(2e-5, gt=0, description="Peak learning rate of the transformer.")
    head_lr: float = Field(2e-4, gt=0, description="Peak learning rate of the scoring head.")


class CrossEncoderParams(BaseModel):
    """Hyperparameters of cross-encoder fine-tuning."""

    model_config = ConfigDict(extra="forbid")

    base: str = Field("all-MiniLM-L6-v2", description="Model to start from: a reference operators.models resolves, or "
                      "another kind this run trains (bi-encoder: <output>/<prefix>-bi-encoder, trained first).")
    epochs: int = Field(1, gt=0, description="Passes over the examples.")
    batch_size: int = Field(8, gt=0, description="Queries per optimiser step.")
    lr: float = Field(3e-5, gt=0, description="Peak learning rate of the transformer (linear warmup, then decay).")
    head_lr: float = Field(1e-3, gt=0, description="Peak learning rate of the new scoring head (pooler and "
                           "classifier): it starts random, and at the transformer's rate it would need hundreds "
                           "of steps before its scores differ at all.")
    warmup_ratio: float = Field(0.1, ge=0, lt=1, description="Share of the steps spent warming up.")
    weight_decay: float = Field(0.01, ge=0, description="AdamW weight decay.")
    max_length: int = Field(256, gt=8, description="Tokens per (query, document) pair; longer pairs are truncated.")
    negatives: int = Field(3, gt=0, description="Hard negatives per example scored against its positive.")
    in_batch_negatives: int = Field(1, ge=0, description="Other examples' positives added as negatives per query.")
    scale: float = Field(1.0, gt=0, description="Multiplier of the logits before the softmax.")
    train_layers: int | None = Field(None, ge=0, description="Train only the top N transformer layers (and the "
                                     "head); the embeddings and lower layers stay frozen, which makes a step "
                                     "cheaper on CPU. Null trains every layer.")
    # left out of the dump (and so of the training key) when unset, so checkpoints trained before it existed are reused
    then: FollowUpSchedule | None = Field(None, exclude_if=lambda value: value is None,
                                          description="A follow-up schedule after `epochs` (null: none), e.g. "
                                          f"a fourth epoch at half the rate, as measured in {see_docs('results')}.")


def train_cross_encoder(examples: list[dict[str, Any]], output_dir: str | Path, params: CrossEncoderParams, *,
                        seed: int = 0, max_steps: int | None = None, progress: bool = True,
                        resume: EpochState | None = None) -> dict[str, Any]:
    """Train and save to ``output_dir`` (written whole, by the caller's atomic save); returns the stats.
    ``resume``: go on from an interrupted run's last finished epoch, and save each one (``flows.train.resume``)."""
    import torch
    from sentence_transformers.cross_encoder import CrossEncoder
    from sentence_transformers.cross_encoder.losses import MultipleNegativesRankingLoss

    from operators.models import resolve_model_path

    started = time.perf_counter()
    _loop.seed_everything(seed)
    model = CrossEncoder(str(resolve_model_path(params.base)), num_labels=1, max_length=params.max_length,
                         local_files_only=True, device="cpu" if not torch.cuda.is_available() else None)
    frozen = freeze_lower_layers(model, params.train_layers)
    loss_fn = MultipleNegativesRankingLoss(model, num_negatives=params.in_batch_negatives or None,
                                           scale=params.scale, activation_fn=torch.nn.Identity())
    if params.in_batch_negatives == 0:
        loss_fn.get_in_batch_negatives = lambda anchors, candidates: iter(())
    schedules = [params] + ([params.model_copy(update=params.then.model_dump())] if params.then else [])
    state = resume.load() if resume is not None else None
    losses: list[float] = []
    for stage, schedule in enumerate(schedules):
        if state is not None and state["stage"] > stage:
            continue  # finished before the interruption: the state holds the weights it left
        if stage:  # the follow-up starts as a fresh run from the weights would: seeded anew, shuffled the same way
            _loop.seed_everything(seed)
        _loop.fit(model, lambda columns: loss_fn(columns, None), examples, _param_groups(model, schedule),
                  schedule, seed=seed, max_steps=max_steps, progress=progress, losses=losses, resume=resume,
                  state=state if state is not None and state["stage"] == stage else None, stage=stage,
                  final=stage == len(schedules) - 1, desc="cross-encoder" + (" (follow-up)" if stage else ""))
    model.save(str(output_dir))
    resumed = {"resumed_from": resume.resumed_from} if resume is not None and resume.resumed_from else {}
    return _loop.summary(losses, started, frozen_parameters=frozen, **resumed)


def _param_groups(model: Any, params: CrossEncoderParams) -> list[dict[str, Any]]:
    """The transformer's trainable parameters at ``lr``, the new scoring head's at ``head_lr``."""
    head = [p for n, p in model.named_parameters() if p.requires_grad and _is_head(n)]
    body = [p for n, p in model.named_parameters() if p.requires_grad and not _is_head(n)]
    return [{"params": body, "lr": params.lr}, {"params": head, "lr": params.head_lr}]


def _is_head(name: str) -> bool:
    return ".classifier." in name or ".pooler." in name or name.startswith(("classifier.", "pooler."))


def freeze_lower_layers(model: Any, train_layers: int | None) -> int:
    """Freeze the embeddings and all but the top ``train_layers`` layers; returns the frozen tensors."""
    if train_layers is None:
        return 0
    import re

    layers = {int(m.group(1)) for name, _ in model.named_parameters() if (m := re.search(r"\.layer\.(\d+)\.", name))}
    first_trained = (max(layers) + 1 - train_layers) if layers else 0
    frozen = 0
    for name, parameter in model.named_parameters():
        match = re.search(r"\.layer\.(\d+)\.", name)
        if ".embeddings." in name or (match and int(match.group(1)) < first_trained):
            parameter.requires_grad_(False)
            frozen += 1
    return frozen
