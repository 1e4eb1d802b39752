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


def is_glob(pattern: str) -> bool:
    """Whether ``pattern`` is read as a glob: it has a wildcard (``*``, ``?``, ``[``) and is no file or folder that
    is there. A file named ``docs [v2].jsonl`` was read as the glob it spells, which matches ``docs 2.jsonl`` and
    never itself: ``no file matches it``, where the file was."""
    return glob.has_magic(pattern) and not os.path.lexists(os.path.expanduser(pattern))


def glob_stem(pattern: str) -> tuple[Path, tuple[str, ...]]:
    """``pattern``'s folders before its first wildcard part (``.`` when it starts with one; the whole path when
    it has none, or is a file or folder that is there: ``is_glob``; a leading folder that is there with a wildcard in
    its name is one of them) and its parts from that wildcard on (none for a plain path); ``~`` expanded."""
    if not is_glob(pattern):
        return Path(os.path.expanduser(pattern)), ()
    parts = Path(os.path.expanduser(pattern)).parts
    literal = next((n for n in range(len(parts) - 1, 0, -1)  # a folder that is there, wildcards and all
                    if glob.has_magic(str(Path(*parts[:n]))) and Path(*parts[:n]).is_dir()), 0)
    fixed = next((i for i, part in enumerate(parts) if i >= literal and glob.has_magic(part)), len(parts))
    return (Path(*parts[:fixed]) if fixed else Path(".")), parts[fixed:]


def denied(pattern: str) -> str | None:
    """Why this user cannot reach ``pattern``'s files, or None: a folder on its fixed part (a path's, a glob's before
    its first wildcard) that it may not enter, or that folder itself (a glob's, a folder source's) that it may not
    list. Such a source read as "no such file or folder", "no file matches it", or an internal PermissionError."""
    from operators.path_access import unreachable

    stem, rest = glob_stem(pattern)
    return unreachable(stem if rest else pattern)


def path_root(pattern: str) -> Path:
    """The folder a source's files are named from (a PDF's docno): a folder itself, a glob's folders before its
    first wildcard, a file's own folder."""
    stem, rest = glob_stem(pattern)
    if rest or stem.is_dir():
        return stem
    return stem.parent


def resolve_paths(pattern: str, *, op: Any, suffixes: tuple[str, ...] = ()) -> list[Path]:
    """Files matching ``pattern`` (a path, a glob, or a folder holding ``*<suffix>`` files), sorted, each real file
    once (``once_each``). A folder's hidden files are not among them (macOS' ``._a.jsonl``, an editor's copy), as a
    glob's ``*`` leaves them out."""
    path = Path(os.path.expanduser(pattern))
    if (why := denied(pattern)) is not None:
        raise SourceNotFoundError(f"cannot read '{pattern}': {why}", op=op.name, step=op.step_id, field="params.path")
    if path.is_dir():
        shown = [p for p in path.iterdir() if not p.name.startswith(".")]
        named = [p for p in shown if p.name.lower().endswith(suffixes or ("",))]
        folders = sorted(p for p in shown if p.is_dir())
        missing = f"folder '{path}' holds no {' or '.join(suffixes) or ''} files; give a file or a glob"
        if folders:
            missing += f" ('{subfolder_glob(pattern, suffixes)}' reads its {len(folders)} subfolder(s) too)"
            warn_subfolders(pattern, folders, suffixes)
    elif is_glob(str(path)):
        named = [Path(p) for p in safe_glob(str(path), op)]
        missing = f"no file matches '{pattern}' (working directory {os.getcwd()})"
    elif path.is_file():
        return [path]
    else:
        named, missing = [], f"file '{pattern}' does not exist (working directory {os.getcwd()})"
    warn_dangling(named, op)
    found = once_each(sorted(p for p in named if p.is_file()), glob_stem(pattern)[0], op)
    if not found:
        raise SourceNotFoundError(missing, op=op.name, step=op.step_id, field="params.path")
    return found


#: The links to files read under another path warned of in this process (absolute), as ``_warned_dangling``.
_warned_same: set[str] = set()


def once_each(paths: list[Path], root: Path, op: Any) -> list[Path]:
    """``paths`` (sorted), each real file once: a link to a file that is read under another path (``link.md ->
    notes.md`` beside it, a file met again through a link to its folder in a recursive glob) made its documents
    twice. A file keeps its path with the fewest links below ``root`` (the real file's, when it is among them), else
    the first in name order; the others are named in one warning. A link to a file read under no other path stays."""
    by_file: dict[str, list[Path]] = {}
    for path in paths:
        by_file.setdefault(os.path.realpath(path), []).append(path)
    read_as = {path: min(same, key=lambda p: _links_below(p, root)) for same in by_file.values() for path in same}
    said = [p for p in paths if read_as[p] != p and os.path.abspath(p) not in _warned_same]
    _warned_same.update(os.path.abspath(p) for p in said)
    if said:
        shown = ", ".join(f"{p} (read as {read_as[p]})" for p in said[:5]) + (", ..." if len(said) > 5 else "")
        logger.warning("%s [%s]: left out %d link(s) to a file read under another path: %s",
                       op.name, op.step_id, len(said), shown)
    return [p for p in paths if read_as[p] == p]


def _links_below(path: Path, root: Path) -> int:
    """How many of ``path`` and its folders below ``root`` are links (``path`` alone when it is not below it)."""
    if not path.is_relative_to(root):
        return int(path.is_symlink())
    parts = path.relative_to(root).parts
    return sum(1 for i in range(len(parts)) if (root / Path(*parts[:i + 1])).is_symlink())


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


def relative_name(path: Path, pattern: str) -> str:
    """``path``'s name in a source's documents: its path from the folder ``pattern`` names (a folder itself, a
    glob's folders before its first wildcard, a file's own folder), with its suffix."""
    try:
        return path.relative_to(path_root(pattern)).as_posix()
    except ValueError:  # not under the root (a symlink resolved elsewhere): its name alone
        return path.name


def warn_no_records(op: Any, path: str | Path) -> None:
    """A file of records that holds none (empty, a CSV's header row alone, a JSONL file of blank lines) gives no
    document: named in one warning line, as a text file without text is, once a run (a sync reads the source
    again). Among others it gave no word before, so a user missed that it held nothing."""
    pattern = getattr(op.params, "path", None)
    if pattern and os.path.isfile(os.path.expanduser(pattern)):
        return  # the file is the whole source: ingestion says it "holds no documents", naming it
    name = relative_name(Path(path), pattern) if pattern else Path(path).name
    said = op.__dict__.setdefault("_no_records", set())
    if name not in said:
        said.add(name)
        logger.warning("%s: no records: no document", name)


def is_gzip(path: str | Path) -> bool:
    return str(path).lower().endswith(".gz")
