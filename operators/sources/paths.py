"""Where a source's files are: a path, a glob or a folder, resolved to files; a glob's fixed folders.

The service confines the paths a request names to its data roots by the same split of a
pattern into its fixed folders and its wildcard part (``glob_stem``), so what it checks is
where a source reads from."""

from __future__ import annotations

import glob
import logging
import os
from pathlib import Path
from typing import Any

from operators.errors import SourceNotFoundError
from operators.sources.link_loops import safe_glob

logger = logging.getLogger("tessera.sources")


def glob_stem(pattern: str) -> tuple[Path, tuple[str, ...]]:
    """``pattern``'s folders before its first wildcard part (``.`` when it starts with one; the whole path when
    it has none) and its parts from that wildcard on (none for a plain path); ``~`` expanded."""
    parts = Path(os.path.expanduser(pattern)).parts
    fixed = next((i for i, part in enumerate(parts) if glob.has_magic(part)), len(parts))
    return (Path(*parts[:fixed]) if fixed else Path(".")), parts[fixed:]


def path_root(pattern: str) -> Path:
    """The folder a source's files are named from (a PDF's docno): a folder itself, a glob's folders before its
    first wildcard, a file's own folder."""
    stem, rest = glob_stem(pattern)
    if rest or stem.is_dir():
        return stem
    return stem.parent


def resolve_paths(pattern: str, *, op: Any, suffixes: tuple[str, ...] = ()) -> list[Path]:
    """Files matching ``pattern`` (a path, a glob, or a folder holding ``*<suffix>`` files), sorted. A folder's
    hidden files are not among them (macOS' ``._a.jsonl``, an editor's copy), as a glob's ``*`` leaves them out."""
    path = Path(os.path.expanduser(pattern))
    if path.is_dir():
        shown = [p for p in path.iterdir() if not p.name.startswith(".")]
        named = [p for p in shown if p.name.endswith(suffixes or ("",))]
        folders = sorted(p for p in shown if p.is_dir())
        missing = f"folder '{path}' holds no {' or '.join(suffixes) or ''} files; give a file or a glob"
        if folders:
            missing += f" ('{subfolder_glob(pattern, suffixes)}' reads its {len(folders)} subfolder(s) too)"
            warn_subfolders(pattern, folders, suffixes)
    elif glob.has_magic(str(path)):
        named = [Path(p) for p in safe_glob(str(path), op)]
        missing = f"no file matches '{pattern}' (working directory {os.getcwd()})"
    elif path.is_file():
        return [path]
    else:
        named, missing = [], f"file '{pattern}' does not exist (working directory {os.getcwd()})"
    warn_dangling(named, op)
    found = sorted(p for p in named if p.is_file())
    if not found:
        raise SourceNotFoundError(missing, op=op.name, step=op.step_id, field="params.path")
    return found


#: The folders whose subfolders were warned of in this process (absolute), as ``_warned_dangling``.
_warned_subfolders: set[str] = set()


def warn_subfolders(pattern: str, folders: list[Path], suffixes: tuple[str, ...] = ()) -> None:
    """One warning naming the subfolders a folder source leaves out, with the glob that reads them: a user's files in
    a subfolder were left out without a word."""
    where = os.path.abspath(os.path.expanduser(pattern))
    if where in _warned_subfolders:
        return
    _warned_subfolders.add(where)
    shown = ", ".join(p.name for p in folders[:10]) + (", ..." if len(folders) > 10 else "")
    logger.warning("%s: %d subfolder(s) not read: %s (a glob reads them too: '%s')", pattern, len(folders), shown,
                   subfolder_glob(pattern, suffixes))


def subfolder_glob(pattern: str, suffixes: tuple[str, ...] = ()) -> str:
    """The glob that reads a folder's files below it too, of the source's first suffix."""
    return os.path.join(pattern, "**", "*" + (suffixes[0] if suffixes else ""))


#: The dangling links warned of in this process (absolute): a source's files are listed by each step that plans,
#: stages and reads them, and the same link was named four times.
_warned_dangling: set[str] = set()


def warn_dangling(paths: list[Path], op: Any) -> None:
    """One warning naming the links among ``paths`` whose target is gone: they are left out, but not silently."""
    dangling = sorted(str(p) for p in paths if p.is_symlink() and not p.exists()
                      and os.path.abspath(p) not in _warned_dangling)
    _warned_dangling.update(os.path.abspath(p) for p in dangling)
    if dangling:
        shown = ", ".join(dangling[:5]) + (", ..." if len(dangling) > 5 else "")
        logger.warning("%s [%s]: left out %d link(s) whose target does not exist: %s",
                       op.name, op.step_id, len(dangling), shown)


def is_gzip(path: str | Path) -> bool:
    return str(path).endswith(".gz")
