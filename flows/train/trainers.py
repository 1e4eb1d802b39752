"""Which trainer makes each kind, called with the recipe's params (ColBERT's own loop is in ``colbert``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from flows.train import checkpoints
from flows.train.errors import TrainError
from flows.train.resume import EpochState


def run_trainer(kind: str, params: Any, examples: list[dict[str, Any]], tmp: Path, *, seed: int,
                max_steps: int | None, progress: bool, resume: EpochState | None = None) -> dict[str, Any]:
    """Train ``kind`` into ``tmp``; returns the trainer's stats (``resume``: the cross-encoder and bi-encoder)."""
    if kind == "cross-encoder":
        from flows.train.cross_encoder import train_cross_encoder

        return train_cross_encoder(examples, tmp, params, seed=seed, max_steps=max_steps, progress=progress,
                                   resume=resume)
    if kind == "bi-encoder":
        from flows.train.bi_encoder import train_bi_encoder

        return train_bi_encoder(examples, tmp, params, seed=seed, max_steps=max_steps, progress=progress,
                                resume=resume)
    import shutil

    started = time.perf_counter()
    plain = [{"query": e["query"], "positive": e["positive"], "negatives": e["negatives"][:params.negatives]}
             for e in examples]
    path = Path(colbert_trainer()(plain, base=params.base, output_dir=tmp, epochs=params.epochs,
                                   batch_size=params.batch_size, lr=params.lr, seed=seed, max_steps=max_steps,
                                   progress=progress))
    if path.resolve() != tmp.resolve():
        shutil.copytree(path, tmp, dirs_exist_ok=True)
    stats: dict[str, Any] = {"seconds": round(time.perf_counter() - started, 3)}
    own = checkpoints.read_record(tmp)  # the trainer's own (settings, loss per step) goes under "training" in ours
    if own is None:
        return stats
    losses = own.pop("losses", None) or []
    return {**own, **stats, "first_loss": losses[0] if losses else None,
            "last_loss_mean20": sum(losses[-20:]) / len(losses[-20:]) if losses else None}


def colbert_trainer():
    try:
        from flows.train.colbert import train_colbert
    except ImportError as err:
        raise TrainError(f"ColBERT training (flows/train/colbert.py) is not available here: {err}",
                         field="model") from None
    return train_colbert
