"""Model loading shared by operators (not an operator category).

One place turns a model reference (a packaged model name, a local folder) into a
loaded model, cached per process so every operator instance and Ray actor thread
shares one copy. Nothing here downloads: a reference whose weights are absent fails
at once with what to install or where to put the files.
"""

from operators.models.sentence_transformers import (
    DEFAULT_ENCODER,
    ModelNotFoundError,
    load_sentence_transformer,
    resolve_model_path,
)

__all__ = ["DEFAULT_ENCODER", "ModelNotFoundError", "load_sentence_transformer", "resolve_model_path"]
