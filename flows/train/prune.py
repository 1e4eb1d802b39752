"""What ``tessera models prune`` may remove from ``$TESSERA_HOME/models``: files Tessera made that nothing reads.

- a checkpoint ``tessera train`` kept aside when it replaced it (``<name>-previous-<key12>[-N]``, see
  ``checkpoints.kept_as``), recognised by its ``training.json``, whose config key the name carries;
- an ONNX export (``<model>-onnx-<weights16>[-<recipe8>]``, see ``onnx_cache_dir``) that is never read again: the
  layout before recipes (no recipe part), another recipe than this installation's, or weights that the model
  folder named in its ``source.json`` no longer has. Only folders holding nothing but an export's files count.

- what a writer killed outright left (``operators.stale_writes``): a checkpoint being saved (``.<name>.tmp-<pid>``,
  whose lock is free or, without one, unchanged for an hour and its pid gone), a folder being pruned
  (``.<name>.pruning-<pid>``) and an export's partial file (``<export>/.model.<pid>.onnx``), by age and pid;
- the state an interrupted training run saved to resume from (``.<name>.resume``, see ``flows.train.resume``), once
  no run is training that model (no live writer of ``.<name>.tmp-<pid>``): only the same ``tessera train`` reads it.

Anything else (a current checkpoint, a folder a user put there, a symlink, the current export, a live writer's
temporary) is never listed.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from flows.train.checkpoints import read_record
from operators.stale_writes import abandoned, last_change, utc_minute

KEPT_ASIDE = re.compile(r"(?P<name>.+)-previous-(?P<key>[0-9a-f]{12}|unkeyed)(?:-\d+)?")
ONNX_EXPORT = re.compile(r"(?P<model>.+)-onnx-(?P<weights>[0-9a-f]{16})(?:-(?P<recipe>[0-9a-f]{8}))?")
#: An export folder's own files (``export_onnx``: the graphs, their partial files, ``source.json``).
EXPORT_FILES = re.compile(r"(model|model_qint8)\.onnx|source\.json|\.(model|model_qint8)\.\d+\.onnx")
#: Temporaries named with their writer's pid: a checkpoint being saved (``checkpoints.write_checkpoint``), a folder
#: being pruned (``remove``), an export's partial file (``export_onnx``).
SAVING = re.compile(r"\.(?P<name>.+)\.tmp-(?P<pid>\d+)")
PRUNING = re.compile(r"\.(?P<name>.+)\.pruning-(?P<pid>\d+)")
PARTIAL_EXPORT = re.compile(r"\.(model|model_qint8)\.(?P<pid>\d+)\.onnx")
#: The state of an interrupted training run (``flows.train.resume.staging_folder``).
RESUME_STATE = re.compile(r"\.(?P<name>.+)\.resume")


@dataclass(frozen=True)
class Prunable:
    path: Path
    kind: str  # "kept-aside checkpoint" | "stale ONNX export" | "unfinished write" | "interrupted training"
    why: str
    size: int  # bytes


def prunable(folder: Path) -> list[Prunable]:
    """The folders under ``folder`` (``models_dir()``) that ``tessera models prune`` would remove, by name."""
    found = []
    for entry in sorted(Path(folder).iterdir()) if Path(folder).is_dir() else []:
        if entry.is_symlink() or not entry.is_dir():
            continue
        if entry.name.startswith("."):
            found += _unfinished([entry], (SAVING, PRUNING)) + _interrupted(entry)
            continue
        why = _kept_aside(entry)
        kind = "kept-aside checkpoint"
        if why is None:
            why, kind = _stale_export(entry), "stale ONNX export"
        if why is not None:
            found.append(Prunable(entry, kind, why, _size(entry)))
        elif ONNX_EXPORT.fullmatch(entry.name):  # the current export: only a dead exporter's partial file
            found += _unfinished(sorted(entry.glob(".*.onnx")), (PARTIAL_EXPORT,))
    return found


def _unfinished(entries: list[Path], patterns: tuple[re.Pattern, ...]) -> list[Prunable]:
    """The temporaries among ``entries`` whose writers are gone (``operators.stale_writes.abandoned``)."""
    found = []
    for entry in entries:
        match = next((m for p in patterns if (m := p.fullmatch(entry.name))), None)
        if match is None or entry.is_symlink():
            continue
        why = abandoned(entry, pid=int(match["pid"]))
        if why is not None:
            found.append(Prunable(entry, UNFINISHED, f"left by a writer killed while it wrote it ({why})",
                                  _size(entry) if entry.is_dir() else entry.lstat().st_size))
    return found


UNFINISHED = "unfinished write"
INTERRUPTED = "interrupted training"


def _interrupted(entry: Path) -> list[Prunable]:
    """``entry`` when it is the resumable state of a training run that is not running now (no live writer of the
    model's checkpoint, ``.<name>.tmp-<pid>``)."""
    match = RESUME_STATE.fullmatch(entry.name)
    if match is None:
        return []
    for saving in entry.parent.glob(f".{glob.escape(match['name'])}.tmp-*"):
        pid = SAVING.fullmatch(saving.name)
        if pid is not None and pid["name"] == match["name"] and abandoned(saving, pid=int(pid["pid"])) is None:
            return []  # that model is training now, and saves its epochs here
    try:
        meta = json.loads((entry / "resume.json").read_text(encoding="utf-8"))
        stage = int(meta.get("stage") or 0)
        after = f"after epoch {int(meta['epoch'])}" + (f" of stage {stage + 1}" if stage else "")
    except (OSError, ValueError, KeyError, TypeError):
        after = "no epoch finished"
    changed = utc_minute(last_change(entry) or 0)
    why = (f"the state a tessera train of {match['name']} saved ({after}, {changed}) to resume from when run "
           "again; removed, that run starts over")
    return [Prunable(entry, INTERRUPTED, why, _size(entry))]


def remove(item: Prunable) -> None:
    """Remove a prunable folder: renamed to a hidden name first, so no half-removed model is ever found by name. An
    unfinished write is checked again and removed under its writer's lock (``stale_writes``)."""
    if item.kind == UNFINISHED:
        match = next(m for p in (SAVING, PRUNING, PARTIAL_EXPORT) if (m := p.fullmatch(item.path.name)))
        abandoned(item.path, pid=int(match["pid"]), remove_it=True)
        return
    gone = item.path.with_name(f".{item.path.name}.pruning-{os.getpid()}")
    os.rename(item.path, gone)
    shutil.rmtree(gone)
    item.path.with_name(f".{item.path.name}.lock").unlink(missing_ok=True)  # an export's lock file, if any


def _kept_aside(entry: Path) -> str | None:
    match = KEPT_ASIDE.fullmatch(entry.name)
    record = read_record(entry) if match else None
    if not isinstance(record, dict):
        return None
    key = str(record.get("config_key") or "unkeyed")[:12]
    if key != match["key"]:
        return None
    return f"kept when {match['name']} was retrained (it was trained {record.get('saved_at') or 'at a date unknown'})"


def _stale_export(entry: Path) -> str | None:
    match = ONNX_EXPORT.fullmatch(entry.name)
    files = list(entry.iterdir()) if match else []
    if not files or not all(EXPORT_FILES.fullmatch(f.name) and f.is_file() and not f.is_symlink() for f in files):
        return None
    from operators.models.fingerprint import model_fingerprint
    from operators.models.sentence_transformers import onnx_export_name, onnx_recipe_key

    if match["recipe"] is None:
        return "made before exports were keyed by recipe; never read"
    if match["recipe"] != onnx_recipe_key():
        return f"made by another export recipe ({match['recipe']}; this installation's: {onnx_recipe_key()})"
    try:
        model = in_this_home(Path(json.loads((entry / "source.json").read_text(encoding="utf-8"))["model"]),
                             entry.parent)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    named = match["model"] in (onnx_export_name(model), model.name)  # (the latter: as older Tessera named exports)
    if named and model.is_dir() and model_fingerprint(model) != match["weights"]:
        return f"of weights {model} no longer has"
    return None


def in_this_home(model: Path, models: Path) -> Path:
    """The model folder an export in ``models`` (``$TESSERA_HOME/models``) was made from. ``source.json`` names it
    whole, in the home it was exported in: in a home copied or moved since, a model of the old home's ``models/``
    is the same folder of this one's, where that is there. Judged by the old home's model (retrained there since),
    the current export of this home's was pruned; with the old home gone, a stale one never was."""
    parts = model.parts
    if model.is_relative_to(models) or "models" not in parts[:-1]:
        return model
    below = parts[len(parts) - parts[::-1].index("models"):]  # what follows the last "models" folder
    here = models.joinpath(*below)
    return here if here.is_dir() else model


def _size(folder: Path) -> int:
    return sum(f.lstat().st_size for f in folder.rglob("*") if not f.is_dir() or f.is_symlink())
