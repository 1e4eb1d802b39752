"""Model loading shared by operators (not an operator category).

One place turns a model reference (a packaged model name, a local folder, a model
trained by ``tessera train``) into a loaded model, held in the process-wide
``ObjectRepository`` so every operator instance, Ray actor thread and Serve replica
shares one copy. Nothing here downloads: a reference whose weights are absent fails
at once with what to install or where to put the files.
"""

from operators.models.cross_encoders import load_cross_encoder
from operators.models.references import DEFAULT_ENCODER, ModelNotFoundError, models_dir, resolve_model_path
from operators.models.repository import ObjectRepository, models
from operators.models.sentence_transformers import load_sentence_transformer

__all__ = ["DEFAULT_ENCODER", "ModelNotFoundError", "ObjectRepository", "load_cross_encoder",
           "load_sentence_transformer", "models", "models_dir", "resolve_model_path"]
