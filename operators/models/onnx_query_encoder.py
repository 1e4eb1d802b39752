"""Embed queries without importing torch: ``tokenizers`` + ONNX Runtime + numpy pooling.

Importing sentence-transformers (and with it transformers and torch) costs seconds of
CPU, most of a one-query ``tessera run``. A query needs only the tokenizer, the
transformer's forward pass and the pooling, so ``retrieve.dense`` embeds with this
encoder when everything it needs is present:

* the model's ONNX export (``export_onnx``: ``$TESSERA_HOME/models/<model>-onnx-<fingerprint>-<recipe>/``),
  made by ``tessera ingest`` at its end (``export_after_ingest``), by ``backend: onnx``, or by
  ``retrieve.dense`` itself, once, when it embedded queries through torch; ``export_query_encoder`` runs it in
  a short-lived child process (``query_encoder_export``), so a long-lived caller keeps no exporter in memory;
* ``onnxruntime`` and ``tokenizers`` importable, and the model's ``tokenizer.json``;
* a sentence-transformers folder whose modules are a text Transformer, a ``mean`` or
  ``cls`` Pooling and optionally Normalize, with no default prompt and no lower-casing.

Otherwise ``FastPathUnavailable`` says why and the caller takes the torch path. The
vectors equal sentence-transformers' (same tokens, same batches sorted by length, the
same graph as ``backend: onnx``; tests/operators/models/test_onnx_query_encoder.py).
``TESSERA_QUERY_ENCODER=torch`` turns this path (and the export) off; ``onnx`` requires
it (exporting when missing) and fails with the reason when it cannot apply.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from operators.errors import FlowCancelled, TesseraError
from operators.interrupt import checkpoint
from operators.models.batching import CPU_BATCH
from operators.models.fast_tokens import batching, longest_first, token_arrays
from operators.models.query_encoder_export import NOT_ON_CPU
from operators.models.references import resolve_model_path
from operators.models.repository import models
from operators.models.sentence_transformers import onnx_cache_dir, onnx_session

log = logging.getLogger(__name__)

#: One export at a time per process (and per model across processes: a file lock), and one try per export folder: a
#: replica's concurrent searches do not each export, and a model whose export failed is not tried on every request.
#: Keyed by the folder, not the model: a process whose $TESSERA_HOME changed (a test, a notebook) exports again there.
_EXPORTING = threading.Lock()
_TRIED: set[str] = set()
#: The longest an export's child process may take (MiniLM: about 10 s) before it is ended and the export given up.
EXPORT_TIMEOUT_S = 900
#: How often an export's wait checks whether the run was stopped (seconds).
POLL_S = 0.2

#: Environment variable choosing the query encoder: ``auto`` (default), ``torch`` or ``onnx``.
ENV = "TESSERA_QUERY_ENCODER"
MODES = ("auto", "torch", "onnx")
POOLING_MODES = ("mean", "cls")
#: Legacy ``1_Pooling/config.json`` flags (sentence-transformers < 6) and the mode each turns on.
LEGACY_POOLING = {"pooling_mode_cls_token": "cls", "pooling_mode_mean_tokens": "mean",
                  "pooling_mode_max_tokens": "max", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                  "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}
#: ``sentence_bert_config.json`` keys whose values this encoder reproduces (checked in ``_transformer_config``).
TRANSFORMER_KEYS = {"max_seq_length", "do_lower_case", "transformer_task", "modality_config", "module_output_name",
                    "unpad_inputs"}


class FastPathUnavailable(TesseraError):
    """The torch-free query encoder cannot reproduce this model here; the message says why."""


def query_encoder_mode(environ: Mapping[str, str] | None = None) -> str:
    """``$TESSERA_QUERY_ENCODER`` (``auto`` when unset), checked against ``MODES``; ``environ``: where to read it (a
    config's ``runtime_env``, which ``tessera serve`` checks), default this process's."""
    environ = os.environ if environ is None else environ
    mode = (environ.get(ENV) or "auto").strip().lower()
    if mode not in MODES:
        raise FastPathUnavailable(f"{ENV}='{environ[ENV]}' is not one of {', '.join(MODES)}")
    return mode


class OnnxQueryEncoder:
    """A sentence-transformers text model's ``encode`` for queries, on ONNX Runtime (CPU)."""

    def __init__(self, onnx_file: Path, tokenizer_file: Path, *, max_length: int, pooling: str, normalize: bool,
                 dimension: int) -> None:
        from tokenizers import Tokenizer

        self.tokenizer = batching(Tokenizer.from_file(str(tokenizer_file)), max_length)
        try:
            self.session = onnx_session(onnx_file)  # as backend: onnx runs it
        except Exception as err:  # noqa: BLE001 - a damaged export: the torch path still works
            log.warning("ONNX Runtime cannot load %s (%s): queries embed through torch; delete that file (a cached "
                        "export, damaged) and the next run exports it again", onnx_file, err)
            raise FastPathUnavailable(f"ONNX Runtime cannot load {onnx_file}: {err}") from None
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.pooling = pooling
        self.normalize_output = normalize  # the model ends in a Normalize module
        self.dimension = dimension

    def encode(self, texts: list[str], *, batch_size: int = CPU_BATCH, normalize: bool = True) -> np.ndarray:
        """(n, dim) float32 vectors, batched as sentence-transformers batches them (longest texts first)."""
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        order = longest_first(texts)  # SentenceTransformer._inference's order
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            checkpoint()  # a cancelled flow stops between forward passes, as with a torch model
            rows = order[start:start + batch_size]
            out[rows] = self._forward([texts[i] for i in rows], normalize)
        return out

    def _forward(self, batch: list[str], normalize: bool) -> np.ndarray:
        given = token_arrays(self.tokenizer.encode_batch(batch), ("input_ids", "token_type_ids", "attention_mask"))
        mask = given["attention_mask"]
        hidden = self.session.run(None, {name: given[name] for name in self.inputs})[0]
        if self.pooling == "cls":
            vectors = hidden[np.arange(len(batch)), mask.argmax(axis=1)]  # the first unmasked token
        else:
            weights = mask[:, :, None].astype(hidden.dtype)
            vectors = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        for _ in range(int(self.normalize_output) + int(normalize)):  # torch's F.normalize, eps 1e-12
            vectors = vectors / np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        return vectors.astype(np.float32, copy=False)


def load_onnx_query_encoder(reference: str) -> OnnxQueryEncoder:
    """The torch-free encoder of ``reference`` (shared per process), or ``FastPathUnavailable`` with the reason."""
    if query_encoder_mode() == "torch":
        raise FastPathUnavailable(f"{ENV}=torch")
    path = resolve_model_path(reference)
    plan = fast_path_plan(path)
    onnx_file = onnx_cache_dir(path) / "model.onnx"
    if not onnx_file.is_file():
        raise FastPathUnavailable(f"no ONNX export of '{reference}' yet ({onnx_file})")
    return models.get_or_create("onnx_query_encoder", {"path": str(path), "onnx": str(onnx_file)},
                                lambda: OnnxQueryEncoder(onnx_file, **plan))


def fast_path_plan(path: Path) -> dict[str, Any]:
    """What ``OnnxQueryEncoder`` needs for the model folder ``path``, read from its sentence-transformers
    configuration; ``FastPathUnavailable`` when a part of it is one this encoder does not reproduce."""
    missing = [name for name in ("onnxruntime", "tokenizers") if importlib.util.find_spec(name) is None]
    if missing:
        raise FastPathUnavailable(f"{', '.join(missing)} not installed (reinstall Tessera: its base install has them)")
    modules = _read_json(path / "modules.json", "modules.json")
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
    if kinds not in (["Transformer", "Pooling"], ["Transformer", "Pooling", "Normalize"]) or not all(
            str(m.get("type", "")).startswith("sentence_transformers.") for m in modules):
        raise FastPathUnavailable(f"modules {kinds}: only Transformer, Pooling[, Normalize] are reproduced")
    st_config = _read_json(path / "config_sentence_transformers.json", None) or {}
    if st_config.get("default_prompt_name"):
        raise FastPathUnavailable(f"default prompt '{st_config['default_prompt_name']}' is not applied here")
    transformer = path / (modules[0].get("path") or "")
    max_length = _transformer_config(transformer)
    tokenizer_file = transformer / "tokenizer.json"
    if not tokenizer_file.is_file():
        raise FastPathUnavailable(f"no tokenizer.json in {transformer}")
    pooling_config = _read_json(path / (modules[1].get("path") or "") / "config.json", "the Pooling config")
    mode, dimension = _pooling(pooling_config)
    return {"tokenizer_file": tokenizer_file, "max_length": max_length, "pooling": mode,
            "normalize": len(modules) == 3, "dimension": dimension}


def stated_dimension(reference: str) -> int | None:
    """The vectors' dimension as the model folder's sentence-transformers configuration states it, without
    loading the model: an ingestion on Ray needs only this on its driver, where loading the model took seconds
    (and a CUDA context on a GPU machine) for nothing. None where the folder does not state it plainly (a Dense
    layer, several poolings, a static model, no such model): the model is then loaded to ask."""
    from operators.models import resolve_model_path

    try:
        return int(fast_path_plan(resolve_model_path(reference))["dimension"])
    except (TesseraError, OSError):
        return None


def _transformer_config(folder: Path) -> int:
    """The Transformer module's max_seq_length, capped as sentence-transformers caps it (the tokenizer's
    ``model_max_length`` when unset, never past ``max_position_embeddings``)."""
    config = _read_json(folder / "sentence_bert_config.json", None) or {}
    unknown = sorted(set(config) - TRANSFORMER_KEYS)
    if unknown:
        raise FastPathUnavailable(f"sentence_bert_config.json sets {', '.join(unknown)}")
    if config.get("do_lower_case"):
        raise FastPathUnavailable("do_lower_case is not applied here")
    if config.get("transformer_task", "feature-extraction") != "feature-extraction":
        raise FastPathUnavailable(f"transformer_task '{config['transformer_task']}'")
    if set(config.get("modality_config") or {"text": {}}) != {"text"}:
        raise FastPathUnavailable("a model with modalities other than text")
    if config.get("module_output_name", "token_embeddings") != "token_embeddings":
        raise FastPathUnavailable(f"module_output_name '{config['module_output_name']}'")
    hf_config = _read_json(folder / "config.json", "config.json")
    positions = hf_config.get("max_position_embeddings")
    length = config.get("max_seq_length")
    if length is None:
        length = (_read_json(folder / "tokenizer_config.json", None) or {}).get("model_max_length")
        if isinstance(positions, int) and positions != -1 and isinstance(length, (int, float)):
            length = min(length, positions)
    if not isinstance(length, (int, float)) or length < 1 or length > 1_000_000:
        raise FastPathUnavailable(f"no usable max_seq_length ({length!r})")
    return int(length)


def _pooling(config: dict[str, Any]) -> tuple[str, int]:
    mode = config.get("pooling_mode")
    if mode is None:
        modes = [m for key, m in LEGACY_POOLING.items() if config.get(key)] or ["mean"]
        mode = modes[0] if len(modes) == 1 else modes
    if isinstance(mode, list) and len(mode) == 1:
        mode = mode[0]
    if mode not in POOLING_MODES:
        raise FastPathUnavailable(f"pooling {mode!r}: only {' and '.join(POOLING_MODES)} are reproduced")
    if config.get("include_prompt") is False:
        raise FastPathUnavailable("include_prompt: false")
    dimension = config.get("embedding_dimension", config.get("word_embedding_dimension"))
    if not isinstance(dimension, int):
        raise FastPathUnavailable("the Pooling config names no embedding dimension")
    return mode, dimension


def _read_json(file: Path, required: str | None) -> Any:
    """``file``'s JSON; None when it is absent and not ``required`` (else ``FastPathUnavailable``)."""
    try:
        return json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        if required:
            raise FastPathUnavailable(f"no {required} ({file})") from None
        return None
    except (OSError, ValueError) as err:
        raise FastPathUnavailable(f"{file} does not read as JSON: {err}") from None


def export_query_encoder(reference: str, *, wait: bool = False) -> Path | None:
    """Export ``reference``'s transformer to ONNX for later processes' queries, once, when worth it: the
    ONNX libraries are installed (base dependencies), ``$TESSERA_QUERY_ENCODER`` is not ``torch``, the
    model is a text model the fast path reproduces and its torch copy runs on the CPU. The export always runs in a
    child process (``query_encoder_export``), even where torch is loaded already: the caller never imports torch
    or the exporter for it and gets only the file. Never fails: a failed export is logged once with its reason
    and the torch path goes on, and not tried again in this process. One export at a time per model, across
    processes: a call while another thread or process exports it returns at once, or waits with ``wait``. The
    file, or None when nothing was exported."""
    try:
        if query_encoder_mode() == "torch" or any(
                importlib.util.find_spec(m) is None for m in ("onnx", "onnxscript", "onnxruntime")):
            return None
        path = resolve_model_path(reference)
        fast_path_plan(path)
        folder = onnx_cache_dir(path)  # the model's fingerprint: its files listed and stat'ed, so once
        if (folder / "model.onnx").is_file():
            return None
        if not _EXPORTING.acquire(blocking=wait):
            return None  # another thread is exporting: this one's queries go on through torch
        try:
            if str(folder) in _TRIED:
                return None  # tried in this process already
            return _export_in_child(reference, path, wait=wait)
        finally:
            _EXPORTING.release()
    except FlowCancelled:  # the run was stopped during the export: it stops now, not after a torch fallback
        raise
    except FastPathUnavailable as err:
        log.debug("no query-encoder export for '%s': %s", reference, err)
    except Exception as err:  # noqa: BLE001 - an optimisation must never fail the query
        log.warning("could not export '%s' to ONNX for the query fast path: %s", reference, err)
    return None


class ExportFailed(TesseraError):
    """The export's child process failed; the message is its reason."""


def _export_in_child(reference: str, path: Path, *, wait: bool) -> Path | None:
    """Run ``query_encoder_export`` for ``path`` under a file lock beside its export folder (one export per model
    across processes; the OS drops it when its holder dies). The child shares this process's group (a Ctrl-C
    reaches both); one still running when this process stops waiting is ended, and a partial file it leaves
    (``export_onnx`` writes ``.model.<pid>.onnx``, then renames it) is removed."""
    from filelock import FileLock, Timeout

    folder = onnx_cache_dir(path)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        lock = FileLock(folder.parent / f".{folder.name}.lock")
        lock.acquire(timeout=-1 if wait else 0)
    except Timeout:
        return None  # another process exports it: this one's queries go on through torch
    except OSError:  # a models folder this process cannot write (a read-only $TESSERA_HOME): said once, not per step
        _TRIED.add(str(folder))
        raise
    try:
        if (folder / "model.onnx").is_file():
            return None  # made meanwhile by the process that held the lock
        _TRIED.add(str(folder))
        # WARNING, not INFO: the CLI shows warnings (flows/commands/_log_lines.py, this one as a note), and a user
        # who waits ~10 s for a first query (or at the end of an ingest) should see why, once
        log.warning("preparing the torch-free query encoder for '%s' (once, 10-20 s)", reference,
                    extra={"note": True})
        log.info("exporting '%s' to ONNX in %s (child process)", reference, folder)
        root = str(Path(__file__).resolve().parents[2])  # the folder holding `operators`, wherever the child starts
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        command = [sys.executable, "-m", "operators.models.query_encoder_export", reference, str(os.getpid())]
        with subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env=env) as child:
            try:
                errors = wait_for_child(child, EXPORT_TIMEOUT_S)
            except BaseException:  # interrupted, or past the timeout: the child must not outlive the wait
                child.terminate()  # SIGTERM: it unwinds and removes its partial file
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                raise
            finally:
                (folder / f".model.{child.pid}.onnx").unlink(missing_ok=True)  # left by a child killed outright
    finally:
        _remove_failed_export(folder, lock)
    checkpoint()  # a terminal's Ctrl-C ended the child too: the run stops, no "could not export" warning
    if child.returncode == NOT_ON_CPU:
        log.debug("no query-encoder export for '%s': %s", reference, errors.strip())
        return None
    if child.returncode != 0 or not (folder / "model.onnx").is_file():
        log.debug("the export of '%s' failed:\n%s", reference, errors)
        reason = ([line for line in errors.splitlines() if line.strip()] or [f"exit status {child.returncode}"])[-1]
        raise ExportFailed(reason)
    return folder / "model.onnx"


def _remove_failed_export(folder: Path, lock: Any) -> None:
    """Release ``lock``; where no export was made (a full disk refused it, the child failed or was stopped), remove
    the empty export folder and the lock file, which stayed behind for good. A process still waiting on the removed
    lock file may export beside a newcomer: each writes its own temporary file and renames it, so one wins whole."""
    made = (folder / "model.onnx").is_file()
    if not made:
        with contextlib.suppress(OSError):
            folder.rmdir()  # only an empty one: a folder holding anything is left as it is
    lock.release()
    if not made:
        with contextlib.suppress(OSError):
            Path(lock.lock_file).unlink(missing_ok=True)


def wait_for_child(child: subprocess.Popen, timeout: float) -> str:
    """``child``'s stderr once it exits, checking the run's cancel (``checkpoint``) every ``POLL_S`` meanwhile: a
    Ctrl-C or SIGTERM of a `tessera run` waited for the whole 10-20 s export, then loaded torch for the query.
    Raises ``subprocess.TimeoutExpired`` past ``timeout`` seconds, ``FlowCancelled`` when the run is stopped."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        checkpoint()
        try:
            return child.communicate(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))[1]
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise


def export_after_ingest(index: str | os.PathLike) -> tuple[str, Path] | None:
    """``tessera ingest``'s last step: export the encoder of ``index`` (a path or an index name) for the
    torch-free query path now, so the index's first dense query pays neither torch nor the export. (encoder,
    export file) when made now; None when the index has no vectors, ``$TESSERA_QUERY_ENCODER`` is ``torch``, the
    export exists already, or the fast path does not apply to the model (its queries go through torch). Never fails,
    as ``export_query_encoder``: the ingest it ends has succeeded."""
    from operators.store import Index

    try:
        settings = Index.open(index, verify=False).settings
    except (OSError, TesseraError) as err:  # no manifest (an empty source): nothing to search yet
        log.debug("no query-encoder export for %s: %s", index, err)
        return None
    if not settings.dense:
        return None
    exported = export_query_encoder(settings.encoder, wait=True)
    return None if exported is None else (settings.encoder, exported)
