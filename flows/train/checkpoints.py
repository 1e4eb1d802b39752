"""Where trained models go, how a finished one is recognised, and writing one atomically.

A checkpoint is a model folder under ``operators.models.models_dir()`` (or
``--output``) with a ``training.json`` beside the weights: the dataset, split and
counts, the hyperparameters, the seconds it took and the library versions. Its
``config_key`` hashes everything that decides the weights (the mined examples'
content, the base model's files, the hyperparameters; recorded as ``key_inputs``), so
training again with the same inputs reuses the folder, and any change retrains and
says which input changed. A folder is written under a
temporary name and renamed into place, so a killed run never leaves a half-written
model where the operators look for one.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from operators.atomic import fsync_tree, replace_folder
from operators.disk_refusal import refusal, where
from operators.stale_writes import WriterLock
from operators.models.fingerprint import TRAINING_FILE


def examples_sha256(examples: list[dict[str, Any]]) -> str:
    """Content hash of mined examples (order matters: it decides the batches)."""
    digest = hashlib.sha256()
    for e in examples:
        digest.update(json.dumps([e["query"], e["positive"], e["negatives"]], ensure_ascii=False).encode())
        digest.update(b"\n")
    return digest.hexdigest()


def config_key(payload: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def base_fingerprint(reference: str) -> str:
    """The base model's files, so a retrained base (``tessera-bi-encoder``) retrains what starts from it."""
    from operators.models import resolve_model_path
    from operators.models.fingerprint import model_fingerprint

    path = resolve_model_path(reference)
    return f"{path.name}:{model_fingerprint(path)}"


def read_record(folder: Path) -> dict[str, Any] | None:
    """The ``training.json`` of the checkpoint in ``folder``; None where there is none or it cannot be read."""
    try:
        return json.loads((folder / TRAINING_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def changed_inputs(record: dict[str, Any], key_inputs: dict[str, Any]) -> str:
    """Why a checkpoint's ``record`` does not match ``key_inputs``, in words."""
    recorded = record.get("key_inputs")
    if not isinstance(recorded, dict):
        return "it was trained by an older Tessera that did not record its inputs"
    changed = [name for name, value in key_inputs.items() if name != "params" and recorded.get(name) != value]
    old_params = recorded.get("params") or {}
    changed += [f"params.{name}" for name, value in key_inputs["params"].items() if old_params.get(name) != value]
    return f"{', '.join(changed)} changed" if changed else "its config key differs"


def versions() -> dict[str, str]:
    """The libraries' versions a checkpoint records, from their installed metadata (no import of torch for it)."""
    from importlib.metadata import version

    return {"python": platform.python_version(), "torch": version("torch"), "transformers": version("transformers"),
            "sentence_transformers": version("sentence-transformers")}


def check_destination(output: Path, folders: list[Path], *, force: bool) -> None:
    """Fail before any work (mining takes minutes) when the checkpoints cannot go where they would: ``output`` is a
    file (or under one), or a checkpoint folder holds something that is not a checkpoint (no ``training.json``:
    a folder of the user's, which replacing it would delete) and ``force`` is not given."""
    from flows.train.errors import TrainError

    for parent in (output, *output.parents):
        if parent.exists():
            if not parent.is_dir():
                where = "" if parent == output else f" (under {parent}, a file)"
                raise TrainError(f"--output {output} is not a folder{where}: give a folder for the checkpoints "
                                 "(made if missing)", field="output")
            _check_writable(output, parent)
            break
    for folder in folders:
        if folder.exists() and not folder.is_dir():
            raise TrainError(f"{folder} is a file, not a model folder: move it, or train into another --output or "
                             "--name-prefix", field="output")
        if folder.is_dir() and not (folder / TRAINING_FILE).is_file() and not force:
            raise TrainError(f"{folder} exists but is not a checkpoint of tessera train (no {TRAINING_FILE}): "
                             "training would replace it and delete what it holds; move it, pick another --output or "
                             "--name-prefix, or pass --force to replace it", field="output")


def _check_writable(output: Path, existing: Path) -> None:
    """Refuse an ``output`` whose nearest ``existing`` folder cannot take a file (read-only, another user's), by
    writing one there: the run failed when it saved its first model, as an internal error, after minutes of mining."""
    import tempfile

    from flows.train.errors import TrainError

    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as err:
        raise TrainError(f"--output {output} cannot be written ({err.strerror or err} in {existing}): give a folder "
                         "you can write for the checkpoints", field="output") from None


def kept_as(folder: Path) -> Path | None:
    """Where the checkpoint in ``folder`` goes when a new one replaces it: a sibling named by its config key
    (``<name>-previous-<key>``), so a retrain by mistake (a changed input, ``--force``) loses no trained model;
    None when ``folder`` holds no checkpoint."""
    record = read_record(folder)
    if record is None:
        return None
    stem = f"{folder.name}-previous-{str(record.get('config_key') or 'unkeyed')[:12]}"
    aside, n = folder.with_name(stem), 2
    while aside.exists():
        aside, n = folder.with_name(f"{stem}-{n}"), n + 1
    return aside


def replacement_note(folder: Path, previous: dict[str, Any] | None,
                     key_inputs: dict[str, Any]) -> tuple[str, Path | None]:
    """What the log line before training says of the checkpoint it will replace, and where that one is kept."""
    aside = kept_as(folder)
    if aside is None:
        return "", None
    why = changed_inputs(previous, key_inputs) if previous is not None else "--force"
    return f" (replacing the checkpoint there: {why}; the old one is kept as {aside.name})", aside


def write_checkpoint(folder: Path, save: Callable[[Path], dict[str, Any]], record: dict[str, Any], *,
                     keep_previous: Path | None = None) -> dict[str, Any]:
    """Call ``save(tmp)``, write ``training.json`` (``record`` plus the trainer's stats under ``training``, the
    seconds and the versions), then put ``tmp`` in place of ``folder`` (atomic rename); returns the record. The
    checkpoint ``folder`` held is renamed to ``keep_previous`` when given (``kept_as``), else removed."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    with WriterLock(tmp):  # killed outright, this run leaves tmp with its lock free: tessera models prune removes it
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            with saving_to(folder):  # a full disk: one line naming the folder, not the library's error
                started = time.perf_counter()
                stats = save(tmp)
                record = {**record, "training": stats, "seconds": round(time.perf_counter() - started, 3),
                          "saved_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "versions": versions()}
                (tmp / TRAINING_FILE).write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
                fsync_tree(tmp)
            if keep_previous is not None and (folder / TRAINING_FILE).is_file():
                os.rename(folder, keep_previous)  # only once the new one is complete: a failed run keeps it in place
            replace_folder(tmp, folder)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return record


@contextlib.contextmanager
def saving_to(folder: Path) -> Iterator[None]:
    """A save into ``folder``'s temporary sibling that the disk refuses, as a ``TrainError`` naming the folder and
    what to do: it was an internal error (``SafetensorError: Error while serializing: I/O error: No space left on
    device (os error 28)``) that named no folder, after the whole training."""
    from flows.train.errors import TrainError

    try:
        yield
    except Exception as err:  # noqa: BLE001  (only the disk's refusal is said here)
        if (said := refusal(err)) is None:
            raise
        raise TrainError(f"cannot save the trained model to {folder}: {said} ({where(folder.parent)}); nothing was "
                         f"saved, and what {folder} held before is unchanged: free space there (or set TESSERA_HOME "
                         "to another disk), then run the command again") from None


def trained_models(folder: Path) -> list[dict[str, Any]]:
    """Every checkpoint of ``tessera train`` in ``folder`` (a model folder with a readable ``training.json``), by
    name: what ``tessera train --list`` shows. Hidden folders (a run's staging or resumable state) are left out."""
    try:
        paths = sorted(p for p in Path(folder).iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    rows = []
    for path in paths:
        record = read_record(path)
        if record is None:
            continue
        counts = record.get("counts") or {}
        hyper = record.get("hyperparameters") or {}
        rows.append({"name": path.name, "kind": record.get("kind"), "base": hyper.get("base", record.get("base")),
                     "dataset": record.get("dataset"), "split": record.get("split"),
                     "examples": counts.get("examples", record.get("examples")),
                     "judged_examples": counts.get("judged_examples"), "pseudo_examples": counts.get("pseudo_examples"),
                     "steps": (record.get("training") or {}).get("steps", record.get("steps")),
                     "trained_at": record.get("saved_at") or _modified(path / TRAINING_FILE), "path": str(path)})
    return rows


def _modified(file: Path) -> str:
    """When ``file`` was last written, for a record that says nothing of when it was trained."""
    return time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(file.stat().st_mtime))
