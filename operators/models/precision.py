"""The precision a torch model's weights run at.

float32 is the default everywhere: on a CPU it is the fast path, and the vectors and scores tests
compare against are float32. On a GPU, float16 or bfloat16 halves the memory traffic of every
forward pass, which is what makes a GPU encoder several times faster; outputs are still handed on
as float32 arrays.
"""

from __future__ import annotations

from typing import Any, Literal

Precision = Literal["float32", "float16", "bfloat16"]


def with_precision(model: Any, dtype: str) -> Any:
    """``model`` (a torch module) with its weights in ``dtype``; float32 leaves it as loaded."""
    if dtype == "float32":
        return model
    import torch

    return model.to(dtype=getattr(torch, dtype))
