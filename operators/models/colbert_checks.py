"""Whether a model folder is a ColBERT checkpoint, from its files alone (no torch, no weights loaded).

Why: ``rerank.colbert`` named a bi-encoder, a cross-encoder or a plain encoder used to pass the pre-run model check
(``flows.model_check``) and fail only when its step loaded the model, after the retrieval before it (through the
service, a 500). The layouts are those ``operators.models.colbert.checkpoints`` reads; this module stays outside
that package, which imports torch.
"""

from __future__ import annotations

import json
from pathlib import Path

from operators.models.references import WrongModelKindError

#: Tessera's own layout (``operators.models.colbert.checkpoints``): its config and its projection.
CONFIG_FILE = "colbert_config.json"
LINEAR_FILE = "colbert_linear.safetensors"
#: The format its config records; a later Tessera's checkpoint, read as this one's, would score with wrong settings.
FORMAT = "tessera-colbert/1"


class NotAColbertModelError(WrongModelKindError):
    """A model folder that is there but holds no ColBERT projection: the ColBERT model asked for is not here."""


def check_colbert(path: Path, name: str | None = None) -> None:
    """Raise ``NotAColbertModelError`` when ``path`` holds no ColBERT projection in any layout; a folder whose files
    say nothing against it (weights in ``pytorch_model.bin``, read only by loading them) passes. ``name``: how the
    error's ``public`` wording names the model (default the folder's name), without the path."""
    later = later_format(_read_json(path / CONFIG_FILE))  # None without the file (another layout)
    if later:  # refused before the run, not when its step loads it after the retrieval before it
        raise WrongModelKindError(f"{path / CONFIG_FILE} {later}", public=f"'{name or path.name}' {later}")
    problem = _no_projection(path)
    if problem:
        why = (f"{problem}; point the reference at a ColBERT checkpoint (one made by tessera train --model colbert, "
               "a PyLate or a Stanford ColBERT folder)")
        raise NotAColbertModelError(f"not a ColBERT model: {path} {why}",
                                    public=f"not a ColBERT model: '{name or path.name}' {why}")


def later_format(config: object) -> str | None:
    """Why a checkpoint of Tessera's layout whose config (``config``, read) names another format than ``FORMAT`` is
    not read by this Tessera, or None."""
    found = config.get("format", FORMAT) if isinstance(config, dict) else FORMAT
    if found == FORMAT:
        return None
    return (f"has format {found!r}, which a later Tessera saved (this one reads {FORMAT!r}): run that Tessera, or "
            "train the model again with this one")


def _no_projection(path: Path) -> str | None:
    """What ``path`` is instead of a ColBERT model, or None when it may be one."""
    if (path / CONFIG_FILE).is_file():
        return None if (path / LINEAR_FILE).is_file() else f"has {CONFIG_FILE} but no {LINEAR_FILE}"
    config = _read_json(path / "config.json")
    architectures = [str(name) for name in config.get("architectures") or []] if isinstance(config, dict) else []
    settings = _read_json(path / "config_sentence_transformers.json")
    if (isinstance(settings, dict) and settings.get("model_type") == "CrossEncoder") or any(
            name.endswith("ForSequenceClassification") for name in architectures):
        return f"is a cross-encoder (a sequence classifier: {', '.join(architectures) or 'model_type CrossEncoder'})"
    modules = _read_json(path / "modules.json")
    if isinstance(modules, list):  # sentence-transformers' layout (PyLate's too)
        kinds = {str(module.get("type", "")).rsplit(".", 1)[-1] for module in modules if isinstance(module, dict)}
        if "Pooling" in kinds:
            return "is a sentence embedding model (a bi-encoder: it pools its tokens), with no ColBERT projection"
        return None if "Dense" in kinds else "has no ColBERT projection (no Dense module): it is a plain encoder"
    if not isinstance(config, dict):
        return "is not a model folder (no readable config.json)"
    names = _tensor_names(path / "model.safetensors")
    if names is None or "linear.weight" in names:  # Stanford ColBERT keeps its projection beside BERT's weights
        return None
    return "has no ColBERT projection (no linear.weight among its weights): it is a plain encoder"


def _read_json(file: Path) -> object:
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _tensor_names(file: Path) -> set[str] | None:
    """The tensor names in a safetensors file's header (no tensor is read), or None without a readable one."""
    from safetensors import safe_open

    if not file.is_file():
        return None
    try:
        with safe_open(str(file), framework="numpy") as weights:
            return set(weights.keys())
    except Exception:  # noqa: BLE001  (a damaged file: the loader says what is wrong with it)
        return None
