"""Load sentence-transformers ``CrossEncoder`` checkpoints offline, shared per process.

Any CrossEncoder folder works (a checkpoint trained by ``tessera train``, one a user
copied here); the reference is resolved like every model reference
(``operators.models.references``). Pairs longer than ``max_length`` tokens are
truncated by the tokenizer, so an overlong document never fails a step.
"""

from __future__ import annotations

import logging
import os

from operators.interrupt import install
from operators.models.precision import with_precision
from operators.models.references import resolve_model_path
from operators.models.repository import models

log = logging.getLogger(__name__)


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
