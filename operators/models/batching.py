"""Texts per forward pass when an operator's params leave the batch size unset.

A batch pads every text to its longest, and on a CPU a small batch also stays in
cache: on 2 cores all-MiniLM-L6-v2 encoded 1,024 SciFact abstracts 1.14x faster 16 at a
time than 64 at a time, and a cross-encoder scored (title, abstract) pairs 1.38x faster
(``benchmarks/encode_batch_size.py``). A GPU needs large batches to stay busy: on an
H100, 128 at a time embedded 1.14x and scored pairs 1.21x faster than 64 (256 was slower again).
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
