"""Reading a ColBERT checkpoint from any of three layouts, offline.

(a) Tessera's own (``ColbertModel.save``, ``tessera train``): an HF model folder,
    ``colbert_linear.safetensors`` (``weight``: [dim, hidden]) and ``colbert_config.json``;
(b) PyLate / sentence-transformers: ``modules.json`` with a Transformer module and
    Dense modules (``<path>/config.json``, ``<path>/model.safetensors`` with
    ``linear.weight``), settings in ``config_sentence_transformers.json``
    (``query_prefix``, ``document_prefix``, ``query_length``, ``document_length``,
    ``do_query_expansion``, ``attend_to_expansion_tokens``, ``skiplist_words``);
(c) Stanford ColBERT: an HF BERT folder (``HF_ColBERT``) whose weights hold
    ``linear.weight``, settings in ``artifact.metadata``.

Each reader returns the transformer's folder, the projection (None for a plain
encoder) and a ``ColbertConfig`` in Tessera's terms, so the model class knows one
layout. Why not PyLate itself: its releases pin older sentence-transformers and
transformers than Tessera does, and the model is a transformer plus one matrix.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field

from operators.errors import TesseraError
# The layout's names live in the module the pre-run check reads checkpoints with (no torch); FORMAT is imported
# from here by model.py, which saves it, and by the package.
from operators.models.colbert_checks import CONFIG_FILE, FORMAT, LINEAR_FILE, later_format  # noqa: F401

_IDENTITY = ("torch.nn.modules.linear.Identity", "torch.nn.Identity")


class ColbertCheckpointError(TesseraError):
    """A folder that is not a usable ColBERT checkpoint (no projection, unknown marker...)."""


class ColbertConfig(BaseModel):
    """How a ColBERT checkpoint tokenizes and scores; saved as ``colbert_config.json``."""

    model_config = ConfigDict(extra="ignore")

    dim: int = Field(128, gt=0, description="Size of each token vector (the projection's output).")
    query_marker: str | None = Field("[unused0]", description="Token inserted after [CLS] in queries; null: none.")
    doc_marker: str | None = Field("[unused1]", description="Token inserted after [CLS] in documents; null: none.")
    query_maxlen: int = Field(32, gt=2, description="Query tokens, markers included (queries pad to it).")
    doc_maxlen: int = Field(180, gt=2, description="Document tokens at most, markers included.")
    query_expansion: bool = Field(True, description="Pad queries with [MASK] to query_maxlen and score every "
                                  "position (ColBERT's query augmentation).")
    attend_to_expansion: bool = Field(False, description="Let the transformer attend to the [MASK] padding.")
    skiplist: list[str] = Field(default_factory=lambda: list(string.punctuation),
                                description="Tokens dropped from documents (punctuation).")
    similarity: Literal["cosine", "l2"] = Field("cosine", description="Token similarity of the checkpoint.")
    layout: str = Field("tessera", description="Layout the checkpoint was read from (tessera, pylate, stanford).")


def read_checkpoint(path: Path) -> tuple[Path, Any, ColbertConfig]:
    """(transformer folder, projection weight [dim, hidden] or None, config) of a checkpoint in any layout."""
    if (path / CONFIG_FILE).is_file():
        return _read_tessera(path)
    if (path / "modules.json").is_file():
        return _read_sentence_transformers(path)
    return _read_stanford(path)


def _read_json(path: Path, kind: type = dict) -> Any:
    """A checkpoint's JSON file, which must hold a ``kind`` (an object, or a list of modules)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ColbertCheckpointError(f"cannot read {path}: {err}") from None
    if not isinstance(data, kind):
        raise ColbertCheckpointError(f"{path} is not a JSON {'object' if kind is dict else 'list of modules'}")
    return data


def _read_weights(folder: Path) -> dict[str, Any]:
    """The state dict of ``model.safetensors`` or ``pytorch_model.bin`` in ``folder`` (empty when neither)."""
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        return load_file(str(folder / "model.safetensors"))
    if (folder / "pytorch_model.bin").is_file():
        return torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    return {}


def _read_tessera(path: Path):
    from safetensors.torch import load_file

    raw = _read_json(path / CONFIG_FILE)
    later = later_format(raw)
    if later:
        raise ColbertCheckpointError(f"{path / CONFIG_FILE} {later}", field="model")
    config = ColbertConfig.model_validate({**raw, "layout": "tessera"})
    file = path / LINEAR_FILE
    if not file.is_file():
        raise ColbertCheckpointError(f"{path} has {CONFIG_FILE} but no {LINEAR_FILE}", field="model")
    return path, load_file(str(file))["weight"], config


def _read_sentence_transformers(path: Path):
    """Layout (b): the Transformer module's folder and the Dense modules folded into one matrix."""
    modules = sorted(_read_json(path / "modules.json", list), key=lambda m: m.get("idx", 0))
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if "Transformer" not in kinds:
        raise ColbertCheckpointError(f"{path}/modules.json has no Transformer module", field="model")
    transformer_dir = path / modules[kinds.index("Transformer")].get("path", "")
    weight = None
    for module, kind in zip(modules, kinds):
        if kind != "Dense":
            continue
        folder = path / module.get("path", "")
        dense = _read_json(folder / "config.json")
        if dense.get("activation_function", _IDENTITY[0]) not in _IDENTITY or dense.get("use_residual"):
            raise ColbertCheckpointError(f"{folder}: only linear Dense modules (identity activation, no residual) "
                                         "are supported", field="model")
        state = _read_weights(folder)
        if "linear.weight" not in state:
            raise ColbertCheckpointError(f"{folder} has no linear.weight", field="model")
        if state.get("linear.bias") is not None and bool(state["linear.bias"].abs().max() > 0):
            raise ColbertCheckpointError(f"{folder}: Dense modules with a bias are not supported", field="model")
        layer = state["linear.weight"].float()
        weight = layer if weight is None else layer @ weight  # stacked linear maps fold into one
    if weight is None:  # a plain sentence-transformers encoder: Tessera's defaults if a projection is added
        return transformer_dir, None, ColbertConfig()
    if "Pooling" in kinds:
        raise ColbertCheckpointError(f"{path} pools its tokens: it is a sentence-transformers bi-encoder, not "
                                     "a ColBERT model", field="model")
    settings: dict[str, Any] = {}
    st_config = path / "config_sentence_transformers.json"
    raw = _read_json(st_config) if st_config.is_file() else {}
    for theirs, ours in (("query_prefix", "query_marker"), ("document_prefix", "doc_marker"),
                         ("query_length", "query_maxlen"), ("document_length", "doc_maxlen"),
                         ("do_query_expansion", "query_expansion"),
                         ("attend_to_expansion_tokens", "attend_to_expansion"), ("skiplist_words", "skiplist")):
        if raw.get(theirs) is not None:
            settings[ours] = raw[theirs]
    settings.setdefault("query_marker", "[Q] ")  # PyLate's defaults where its config is silent
    settings.setdefault("doc_marker", "[D] ")
    for key in ("query_marker", "doc_marker"):
        settings[key] = settings[key] or None  # "" means no marker
    return transformer_dir, weight, ColbertConfig.model_validate({**settings, "layout": "pylate"})


def _read_stanford(path: Path):
    """Layout (c): linear.weight beside the BERT weights, settings from artifact.metadata."""
    if not (path / "config.json").is_file():
        raise ColbertCheckpointError(f"{path} is not a model folder (no config.json)", field="model")
    weight = _read_weights(path).get("linear.weight")
    if weight is None:  # a plain Hugging Face encoder: Tessera's defaults if a projection is added
        return path, None, ColbertConfig()
    meta_file = path / "artifact.metadata"
    meta = _read_json(meta_file) if meta_file.is_file() else {}
    settings = {
        "query_marker": meta.get("query_token_id", "[unused0]"),
        "doc_marker": meta.get("doc_token_id", "[unused1]"),
        "query_maxlen": meta.get("query_maxlen", 32),
        "doc_maxlen": meta.get("doc_maxlen", 180),
        "similarity": meta.get("similarity", "cosine"),
        "attend_to_expansion": bool(meta.get("attend_to_mask_tokens", False)),
        "skiplist": list(string.punctuation) if meta.get("mask_punctuation", True) else [],
        "layout": "stanford",
    }
    return path, weight.float(), ColbertConfig.model_validate(settings)
