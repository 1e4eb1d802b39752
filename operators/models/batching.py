"""Texts per forward pass when an operator's params leave the batch size unset.

A batch pads every text to its longest, and on a CPU a small batch also stays in
cache, so small batches are faster there; a GPU needs large batches to stay busy. A
static model (``tessera train --model static``) has no forward pass to keep in cache:
its cost per batch is Python overhead, so it takes large batches everywhere. The
defaults below are what ``benchmarks/encode_batch_size.py`` and
``benchmarks/embed_static.py`` measured fastest (figures in docs/results.md).
"""

from __future__ import annotations

from typing import Any

CPU_BATCH = 16
ACCELERATOR_BATCH = 128
STATIC_BATCH = 1024


def forward_batch_size(requested: int | None, model: Any) -> int:
    """``requested`` when set, else the default for the kind of ``model`` and the device it runs on."""
    if requested:
        return requested
    if is_static(model):
        return STATIC_BATCH
    device = str(getattr(model, "device", "cpu"))
    return CPU_BATCH if device.startswith("cpu") else ACCELERATOR_BATCH


def is_static(model: Any) -> bool:
    """Whether ``model`` is a sentence-transformers model whose first module is a ``StaticEmbedding``."""
    modules = getattr(model, "_modules", None)
    first = next(iter(modules.values()), None) if isinstance(modules, dict) else None
    return type(first).__name__ == "StaticEmbedding"
