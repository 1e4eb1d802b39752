"""bm25s, imported as if JAX were not installed.

When jax is importable, bm25s imports it and runs one top-k on it while being imported (``bm25s.selection``).
That sets JAX's default device up, and on a GPU machine with jax[cuda] JAX then takes 75 % of the GPU's memory
for its pool. Every process that imports bm25s did this: each of the ingestion's write actors, the driver, a BM25
replica. On the H200 (2026-12-04) the write actors' pools left the embed actors none, every encoder call failed,
and the ingestion fell to bisecting batches one document at a time (benchmarks/gpu/RESULTS.md).

Tessera never uses bm25s's JAX top-k, so the first import of bm25s here hides jax from it; jax stays importable
for everything else. A process that imported jax before keeps bm25s's own choice.
"""

from __future__ import annotations

import sys
import threading
from types import ModuleType

_lock = threading.Lock()


def load_bm25s() -> ModuleType:
    """The bm25s module; import it (once) through this before any ``from bm25s... import``."""
    if "bm25s" in sys.modules:
        return sys.modules["bm25s"]
    with _lock:
        if "bm25s" not in sys.modules:
            _import_without_jax()
    return sys.modules["bm25s"]


def _import_without_jax() -> None:
    if "jax" in sys.modules:  # the process uses JAX already: bm25s may too
        import bm25s  # noqa: F401
        return
    sys.modules["jax"] = None  # ``import jax.lax`` raises ImportError, which bm25s takes as "no JAX"
    try:
        import bm25s  # noqa: F401
    finally:
        if sys.modules.get("jax", ...) is None:
            del sys.modules["jax"]
