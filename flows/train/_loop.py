"""What the trainers share: seeding, batches without a repeated query, the optimiser and its schedule."""

from __future__ import annotations

import math
import random
from typing import Any, Iterator


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

    opt = torch.optim.AdamW(parameters, lr=lr, weight_decay=weight_decay)
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
