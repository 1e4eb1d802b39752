"""What the trainers share: seeding, batches without a repeated query, the optimiser, its schedule and the
step loop (``fit``)."""

from __future__ import annotations

import logging
import math
import random
from typing import TYPE_CHECKING, Any, Callable

from flows.train.step_bar import step_bar

if TYPE_CHECKING:
    from flows.train.resume import EpochState

log = logging.getLogger("tessera.train")


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


def total_steps(n_examples: int, batch_size: int, epochs: int, max_steps: int | None, desc: str = "training",
                epoch_steps: list[int] | None = None) -> int:
    """The steps of a schedule: its epochs', or ``max_steps`` where fewer. More is said, not trained: a schedule is
    its epochs (``--epochs`` trains longer), and ``--max-steps 5000`` over 300 steps stopped at 300 without a word.
    ``epoch_steps``: each epoch's batches where they are not ``n_examples / batch_size`` (``batches``)."""
    epoch_steps = epoch_steps or [steps_per_epoch(n_examples, batch_size)] * epochs
    steps = sum(epoch_steps)
    if max_steps and max_steps > steps:
        fewest, most = min(epoch_steps), max(epoch_steps)
        log.warning("%s: max_steps=%d is more than its %d epoch(s) of %s step(s) (%d examples, batches of %d): it "
                    "stops after %d steps; give more epochs to train longer", desc, max_steps, epochs,
                    fewest if fewest == most else f"{fewest}-{most}", n_examples, batch_size, steps)
    return min(steps, max_steps) if max_steps else steps


def optimizer(parameters, lr: float, weight_decay: float, warmup_ratio: float, steps: int):
    import torch
    from transformers import get_linear_schedule_with_warmup

    opt = torch.optim.AdamW(parameters, lr=lr, weight_decay=weight_decay, fused=True)  # fused: a cheap step on CPU
    schedule = get_linear_schedule_with_warmup(opt, int(steps * warmup_ratio), steps)
    return opt, schedule


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
        seed: int, max_steps: int | None, desc: str, progress: bool, losses: list[float] | None = None,
        resume: EpochState | None = None, state: dict[str, Any] | None = None, stage: int = 0,
        final: bool = True) -> list[float]:
    """Train ``model`` on ``examples`` (``params``: batch_size, epochs, negatives, lr, weight_decay,
    warmup_ratio): ``loss_of(example_columns(batch))`` a step, AdamW with linear warmup and decay over
    ``parameters``; appends each step's loss to ``losses`` and returns it. The model is left in eval mode.

    ``resume``: save the state at the end of each epoch after which more is trained (more epochs of this
    schedule, or a later ``stage`` unless ``final``); ``state``: a state of this ``stage`` that it saved,
    to go on from (the epochs it covers are skipped, with the batches they would have drawn)."""
    from tqdm.auto import tqdm

    losses = [] if losses is None else losses
    rng = random.Random(seed)  # every epoch's batches first: one without a repeated query may be more than n / size
    drawn = [batches(examples, params.batch_size, rng) for _ in range(params.epochs)]
    steps = total_steps(len(examples), params.batch_size, params.epochs, max_steps, desc, [len(b) for b in drawn])
    opt, schedule = optimizer(parameters, params.lr, params.weight_decay, params.warmup_ratio, steps)
    done_epochs = 0
    if state is not None:
        resume.restore(state, model, opt, schedule)
        losses[:] = state["losses"]
        done_epochs = state["epoch"]
    model.train()
    step = 0
    bar = step_bar(steps, desc, progress)
    for epoch, epoch_batches in enumerate(drawn):
        if step >= steps:
            break
        if epoch < done_epochs:
            step = min(steps, step + len(epoch_batches))
            bar.update(step - bar.n)
            continue
        whole = len(epoch_batches) <= steps - step  # not cut short by max_steps
        for batch in epoch_batches[:steps - step]:
            _apply_step(loss_of(example_columns(batch, params.negatives)), model, opt, schedule, losses, bar)
            step += 1
        if resume is not None and whole and (step < steps or not final):
            with tqdm.external_write_mode():
                resume.save(stage=stage, epoch=epoch + 1, model=model, optimizer=opt, schedule=schedule,
                            losses=losses)
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
    bar.set_postfix(loss=running_loss(losses), refresh=False)  # then the step's line shows it
    bar.update(1)


def running_loss(losses: list[float]) -> str:
    """What a progress bar shows: the mean of the last 20 losses (one step's loss is too noisy to read)."""
    return f"{sum(losses[-20:]) / len(losses[-20:]):.3f}"


def summary(losses: list[float], started: float, **extra: Any) -> dict[str, Any]:
    """What a trainer reports: steps, first loss, mean of the last 20 losses, seconds."""
    import time

    return {"steps": len(losses), **extra, "first_loss": losses[0] if losses else None,
            "last_loss_mean20": sum(losses[-20:]) / max(1, len(losses[-20:])),
            "seconds": round(time.perf_counter() - started, 3)}
