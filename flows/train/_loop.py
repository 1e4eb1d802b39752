"""What the trainers share: seeding, batches without a repeated query, the optimiser, its schedule and the
step loop (``fit``)."""

from __future__ import annotations

import math
import random
from itertools import islice
from typing import Any, Callable, Iterator


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def batches(examples: list[dict[str, Any]], batch_size: int, rng: random.Random) -> list[list[dict[str, Any]]]:
    """One epoch: shuffled, no query twice in a batch (its other positives would be in-batch "negatives")."""
    order = list(examples)
    rng.shuffle(order)
    out: list[list[dict[str, Any]]] = []
    pending = order
    while pending:
        batch, seen, later = [], set(), []
        for e in pending:
            if len(batch) < batch_size and e["query"] not in seen:
                batch.append(e)
                seen.add(e["query"])
            else:
                later.append(e)
        out.append(batch)
        pending = later
    return out


def steps_per_epoch(n_examples: int, batch_size: int) -> int:
    return max(1, math.ceil(n_examples / batch_size))


def total_steps(n_examples: int, batch_size: int, epochs: int, max_steps: int | None) -> int:
    steps = steps_per_epoch(n_examples, batch_size) * epochs
    return min(steps, max_steps) if max_steps else steps


def optimizer(parameters, lr: float, weight_decay: float, warmup_ratio: float, steps: int):
    import torch
    from transformers import get_linear_schedule_with_warmup

    opt = torch.optim.AdamW(parameters, lr=lr, weight_decay=weight_decay, fused=True)  # fused: a cheap step on CPU
    schedule = get_linear_schedule_with_warmup(opt, int(steps * warmup_ratio), steps)
    return opt, schedule


def epoch_batches(examples: list[dict[str, Any]], batch_size: int, epochs: int, seed: int) -> Iterator[list]:
    rng = random.Random(seed)
    for _ in range(epochs):
        yield from batches(examples, batch_size, rng)


def padded_negatives(example: dict[str, Any], n: int) -> list[str]:
    """The first ``n`` negatives, cycled when the example has fewer (every column needs a value per row)."""
    negatives = example["negatives"]
    return [negatives[i % len(negatives)] for i in range(n)]


def example_columns(batch: list[dict[str, Any]], negatives: int) -> list[list[str]]:
    """The columns sentence-transformers' MultipleNegativesRankingLoss reads: queries, positives, then
    ``negatives`` columns of hard negatives."""
    columns = [[e["query"] for e in batch], [e["positive"] for e in batch]]
    if negatives:
        rows = [padded_negatives(e, negatives) for e in batch]
        columns += [list(column) for column in zip(*rows)]
    return columns


def fit(model, loss_of: Callable[[list[list[str]]], Any], examples: list[dict[str, Any]], parameters, params, *,
        seed: int, max_steps: int | None, desc: str, progress: bool) -> list[float]:
    """Train ``model`` on ``examples`` (``params``: batch_size, epochs, negatives, lr, weight_decay,
    warmup_ratio): ``loss_of(example_columns(batch))`` a step, AdamW with linear warmup and decay over
    ``parameters``; returns the loss of every step. The model is left in eval mode."""
    from tqdm.auto import tqdm

    steps = total_steps(len(examples), params.batch_size, params.epochs, max_steps)
    opt, schedule = optimizer(parameters, params.lr, params.weight_decay, params.warmup_ratio, steps)
    model.train()
    losses: list[float] = []
    bar = tqdm(total=steps, desc=desc, unit="step", disable=not progress, dynamic_ncols=True)
    for batch in islice(epoch_batches(examples, params.batch_size, params.epochs, seed), steps):
        _apply_step(loss_of(example_columns(batch, params.negatives)), model, opt, schedule, losses, bar)
    bar.close()
    model.eval()
    return losses


def _apply_step(loss, model, opt, schedule, losses: list[float], bar) -> None:
    """Backpropagate ``loss`` (gradients clipped to norm 1), step the optimiser and schedule, report progress."""
    import torch

    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    schedule.step()
    opt.zero_grad()
    losses.append(float(loss.detach()))
    bar.update(1)
    bar.set_postfix(loss=f"{sum(losses[-20:]) / len(losses[-20:]):.3f}")


def summary(losses: list[float], started: float, **extra: Any) -> dict[str, Any]:
    """What a trainer reports: steps, first loss, mean of the last 20 losses, seconds."""
    import time

    return {"steps": len(losses), **extra, "first_loss": losses[0] if losses else None,
            "last_loss_mean20": sum(losses[-20:]) / max(1, len(losses[-20:])),
            "seconds": round(time.perf_counter() - started, 3)}
