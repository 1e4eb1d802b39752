"""Load sentence-transformers ``CrossEncoder`` checkpoints offline, shared per process.

Any CrossEncoder folder works (a checkpoint trained by ``tessera train``, one a user
copied here, a plain Hugging Face ``*ForSequenceClassification`` checkpoint, a
``*ForCausalLM`` reranker that sentence-transformers scores by its yes/no logits); the
reference is resolved like every model reference (``operators.models.references``).
A folder of another kind (a bi-encoder, plain BERT weights) is refused: sentence-transformers
would load it with a randomly initialised scoring head and rerank by noise, without a word.
Pairs longer than ``max_length`` tokens are truncated by the tokenizer, so an overlong
document never fails a step.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from operators.interrupt import install
from operators.models.precision import with_precision
from operators.models.references import WrongModelKindError, resolve_model_path
from operators.models.repository import models

log = logging.getLogger(__name__)
#: The architectures (config.json) whose heads sentence-transformers' CrossEncoder loads trained.
SCORING_HEADS = ("ForSequenceClassification", "ForCausalLM")


class NotACrossEncoderError(WrongModelKindError):
    """A model folder that is there but holds no cross-encoder: the cross-encoder asked for is not on this machine."""


def check_cross_encoder(path: Path, name: str | None = None) -> None:
    """Raise ``NotACrossEncoderError`` unless ``path``'s config names an architecture with a scoring head. ``name``:
    how the error's ``public`` wording names the model (default the folder's name), without the path."""
    def refuse(why: str, public_why: str | None = None) -> NotACrossEncoderError:
        return NotACrossEncoderError(f"not a cross-encoder: {path} {why}",
                                     public=f"not a cross-encoder: '{name or path.name}' {public_why or why}")

    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        advice = "; point the reference at a cross-encoder checkpoint folder"
        raise refuse(f"has no readable config.json ({err}){advice}",  # an OSError's text holds the file's path
                     f"has no readable config.json ({getattr(err, 'strerror', None) or err}){advice}") from None
    architectures = config.get("architectures") if isinstance(config, dict) else None
    if not architectures:  # an old or hand-written config: the weights tell
        if _has_head_weights(path) is False:
            raise refuse(
                "has no sequence-classification head (its config names no architecture and its weights hold no "
                "classifier); point the reference at a cross-encoder checkpoint, or train one with tessera train "
                "--model cross-encoder")
        return
    if not any(str(architecture).endswith(SCORING_HEADS) for architecture in architectures):
        raise refuse(
            "has no sequence-classification head (its config's architectures are "
            f"{', '.join(map(str, architectures))}: a bi-encoder or plain encoder, whose scoring head would be "
            "random); point the reference at a cross-encoder checkpoint, or train one with "
            "tessera train --model cross-encoder")


def load_cross_encoder(reference: str, *, device: str | None = None, max_length: int | None = None,
                       dtype: str = "float32"):
    """A ``CrossEncoder`` for ``reference`` with at most ``max_length`` tokens per pair, its weights in ``dtype``
    (``operators.models.precision``).

    ``max_length`` defaults to the checkpoint's own limit and is capped at the
    model's position embeddings, so truncation always happens before the model sees
    a sequence it cannot embed. A ``max_length`` above the checkpoint's own limit is
    allowed but logged: the model reads positions it was not fine-tuned on, which
    cost the SciFact cross-encoder quality (docs/results.md).
    """
    path = resolve_model_path(reference)
    check_cross_encoder(path)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    def build():
        from sentence_transformers import CrossEncoder
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        model = CrossEncoder(str(path), device=device, local_files_only=True)
        limit = getattr(model.config, "max_position_embeddings", None) or 512
        own = model.max_seq_length
        if max_length and own and max_length > own:
            log.warning("cross-encoder %s: max_length %d is above the %d tokens the checkpoint was saved with "
                        "(usually the length it was trained at); tokens past %d fall on positions it was not "
                        "fine-tuned on, which tends to lower its scores' quality", path, max_length, own, own)
        wanted = max_length or own or limit
        model.max_seq_length = min(wanted, limit)
        return install(with_precision(model, dtype))

    return models.get_or_create("cross_encoder",
                                {"path": str(path), "device": device, "max_length": max_length, "dtype": dtype},
                                build)


def _has_head_weights(path: Path) -> bool | None:
    """Whether the safetensors weights hold a scoring head (a ``classifier`` or ``score`` tensor); None when there
    are no safetensors files to read (their tensor names are read, not the tensors)."""
    from safetensors import safe_open

    files = sorted(path.glob("*.safetensors"))
    if not files:
        return None
    for file in files:
        with safe_open(str(file), framework="numpy") as weights:
            if any({"classifier", "score"} & set(name.split(".")) for name in weights.keys()):
                return True
    return False
