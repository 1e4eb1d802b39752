"""Texts per forward pass when an operator's params leave the batch size unset.

A batch pads every text to its longest, and on a CPU a small batch also stays in
cache, so small batches are faster there; a GPU needs large batches to stay busy. The
defaults below are what ``benchmarks/encode_batch_size.py`` measured fastest on each
(figures in docs/results.md, "Texts per forward pass").
"""

from __future__ import annotations

from typing import Any

CPU_BATCH = 16
ACCELERATOR_BATCH = 128


def forward_batch_size(requested: int | None, model: Any) -> int:
    """``requested`` when set, else the default for the device ``model`` runs on."""
    if requested:
        return requested
    device = str(getattr(model, "device", "cpu"))
    return CPU_BATCH if device.startswith("cpu") else ACCELERATOR_BATCH
