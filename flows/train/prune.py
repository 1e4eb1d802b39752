"""What ``tessera models prune`` may remove from ``$TESSERA_HOME/models``: files Tessera made that nothing reads.

- a checkpoint ``tessera train`` kept aside when it replaced it (``<name>-previous-<key12>[-N]``, see
  ``checkpoints.kept_as``), recognised by its ``training.json``, whose config key the name carries;
- an ONNX export (``<model>-onnx-<weights16>[-<recipe8>]``, see ``onnx_cache_dir``) that is never read again: the
  layout before recipes (no recipe part), another recipe than this installation's, or weights that the model
  folder named in its ``source.json`` no longer has. Only folders holding nothing but an export's files count.

Anything else (a current checkpoint, a folder a user put there, a symlink, the current export) is never listed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from flows.train.checkpoints import read_record

KEPT_ASIDE = re.compile(r"(?P<name>.+)-previous-(?P<key>[0-9a-f]{12}|unkeyed)(?:-\d+)?")
ONNX_EXPORT = re.compile(r"(?P<model>.+)-onnx-(?P<weights>[0-9a-f]{16})(?:-(?P<recipe>[0-9a-f]{8}))?")
#: An export folder's own files (``export_onnx``: the graphs, their partial files, ``source.json``).
EXPORT_FILES = re.compile(r"(model|model_qint8)\.onnx|source\.json|\.(model|model_qint8)\.\d+\.onnx")


@dataclass(frozen=True)
class Prunable:
    path: Path
    kind: str  # "kept-aside checkpoint" | "stale ONNX export"
    why: str
    size: int  # bytes


def prunable(folder: Path) -> list[Prunable]:
    """The folders under ``folder`` (``models_dir()``) that ``tessera models prune`` would remove, by name."""
    found = []
    for entry in sorted(Path(folder).iterdir()) if Path(folder).is_dir() else []:
        if entry.is_symlink() or not entry.is_dir() or entry.name.startswith("."):
            continue
        why = _kept_aside(entry)
        kind = "kept-aside checkpoint"
        if why is None:
            why, kind = _stale_export(entry), "stale ONNX export"
        if why is not None:
            found.append(Prunable(entry, kind, why, _size(entry)))
    return found


def remove(item: Prunable) -> None:
    """Remove a prunable folder: renamed to a hidden name first, so no half-removed model is ever found by name."""
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
    return f"kept when {match['name']} was retrained ({record.get('saved_at') or 'date unknown'})"


def _stale_export(entry: Path) -> str | None:
    match = ONNX_EXPORT.fullmatch(entry.name)
    files = list(entry.iterdir()) if match else []
    if not files or not all(EXPORT_FILES.fullmatch(f.name) and f.is_file() and not f.is_symlink() for f in files):
        return None
    from operators.models.fingerprint import model_fingerprint
    from operators.models.sentence_transformers import onnx_recipe_key

    if match["recipe"] is None:
        return "made before exports were keyed by recipe; never read"
    if match["recipe"] != onnx_recipe_key():
        return f"made by another export recipe ({match['recipe']}; this installation's: {onnx_recipe_key()})"
    try:
        model = Path(json.loads((entry / "source.json").read_text(encoding="utf-8"))["model"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if model.name == match["model"] and model.is_dir() and model_fingerprint(model) != match["weights"]:
        return f"of weights {model} no longer has"
    return None


def _size(folder: Path) -> int:
    return sum(f.lstat().st_size for f in folder.rglob("*") if not f.is_dir() or f.is_symlink())
