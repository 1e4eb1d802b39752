"""A recursive glob (``docs/**/*``) that does not go round link loops: a folder holding a link to itself or to a
folder above it (``docs/self -> .``, ``docs/a/up -> ..``, two folders linking to each other), as some backup and
build tools leave.

Python's recursive glob follows links to folders without end: each file was matched again under ``self/``,
``self/self/``, ... until the path was too long to open (about 40 rounds), so one file became 41 documents and the
last round was named as a link "whose target does not exist"; with two such links the rounds multiplied and
``tessera ingest`` never finished listing. Here ``**`` is walked with ``os.walk``, which follows links to folders as
glob does, but not into a folder that the walk is already inside (by its real path), and the part of the pattern
after ``**`` is matched in each folder by ``glob`` itself. The links left out are named once in a warning. A link
to a folder beside the walk (not around it) is followed, as before.
"""

from __future__ import annotations

import glob
import logging
import os
from typing import Any, Iterable

logger = logging.getLogger("tessera.sources")

#: The loops warned of in this process (absolute): each step that lists a source's files would name them again.
_warned: set[str] = set()


def literal_folders(pattern: str) -> int:
    """How many leading parts of ``pattern`` (split at ``os.sep``) are a folder that is there with a wildcard in its
    name (``notes [draft]/*.md``): they are that folder, where a glob's ``[draft]`` matched ``notes d`` and never
    it, so its files were 'no file matches it'. 0 where none is."""
    parts = pattern.split(os.sep)
    return next((n for n in range(len(parts) - 1, 0, -1)
                 if glob.has_magic(head := os.sep.join(parts[:n])) and os.path.isdir(head)), 0)


def safe_glob(pattern: str, op: Any = None) -> list[str]:
    """``glob.glob(pattern, recursive=True)``, without going round link loops, for a pattern with one ``**`` part
    and no wildcard before it; any other pattern is ``glob.glob``'s. Leading folders that are there with a
    wildcard in their names are matched as themselves (``literal_folders``)."""
    parts = pattern.split(os.sep)
    fixed = literal_folders(pattern)
    if fixed:
        parts = [glob.escape(os.sep.join(parts[:fixed])), *parts[fixed:]]
        fixed = 1
    doubles = [i for i, part in enumerate(parts) if part == "**" and i >= fixed]
    if len(doubles) != 1 or any(glob.has_magic(part) for part in parts[fixed:doubles[0]]):
        return glob.glob(os.sep.join(parts), recursive=True)
    if fixed:  # the walk below lists the folder itself: its name as it is
        parts[0] = os.sep.join(pattern.split(os.sep)[:literal_folders(pattern)])
    at = doubles[0]
    stem = os.sep.join(parts[:at]) or ("" if at == 0 else os.sep)
    rest = parts[at + 1:] or ["*"]
    found: list[str] = []
    chains: dict[str, tuple[str, ...]] = {}
    looped: list[str] = []
    closed: list[OSError] = []  # folders the walk could not list: their files were left out without a word
    for root, folders, _ in os.walk(stem or ".", followlinks=True, onerror=closed.append):
        chain = chains.get(root) or (os.path.realpath(root),)
        kept = []
        for name in folders:
            if name.startswith("."):  # glob's ** leaves hidden folders out
                continue
            folder = os.path.join(root, name)
            real = os.path.realpath(folder)
            if real in chain:
                looped.append(folder)
                continue
            chains[folder] = (*chain, real)
            kept.append(name)
        folders[:] = kept
        base = root if stem else os.path.relpath(root)
        found += glob.glob(os.path.join(glob.escape(base) if base != "." else "", *rest))
        if not pattern.endswith(os.sep + "**") and pattern != "**":
            continue
        found.append(root)  # ``dir/**`` matches the folders too (a caller keeps the files)
    _warn(looped, op)
    _warn_closed(closed, op)
    return found


#: The folders that could not be listed warned of in this process (absolute), as ``_warned``.
_warned_closed: set[str] = set()


def _warn_closed(errors: list[OSError], op: Any) -> None:
    """One warning naming the folders below the walk that it could not list (their mode, a folder gone meanwhile),
    and why: their files are not read."""
    why = {str(e.filename): e for e in errors if e.filename is not None}
    if new := _not_warned_yet(why, _warned_closed):
        shown = ", ".join(f"{name} ({why[name].strerror or why[name]})" for name in new[:5]) + \
            (", ..." if len(new) > 5 else "")
        logger.warning("%sleft out %d folder(s) that could not be listed, with every file below them: %s",
                       _where(op), len(new), shown)


def _warn(looped: list[str], op: Any) -> None:
    if new := _not_warned_yet(looped, _warned):
        shown = ", ".join(f"{link} -> {_target(link)}" for link in new[:3]) + (", ..." if len(new) > 3 else "")
        logger.warning("%snot read again below %d link(s) to a folder that holds them (a loop; each file is read "
                       "once, by its path without the link): %s", _where(op), len(new), shown)


def _not_warned_yet(paths: Iterable[str], warned: set[str]) -> list[str]:
    """The ``paths`` this process has not warned of yet (by absolute path), sorted; from now on it has."""
    new = sorted(path for path in set(paths) if os.path.abspath(path) not in warned)
    warned.update(os.path.abspath(path) for path in new)
    return new


def _where(op: Any) -> str:
    return f"{op.name} [{op.step_id}]: " if op is not None else ""


def _target(link: str) -> str:
    try:
        return os.readlink(link)
    except OSError:  # a folder reached twice otherwise (a bind mount): its real path
        return os.path.realpath(link)
