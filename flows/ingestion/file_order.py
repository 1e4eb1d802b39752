"""The order in which staging reads a source's files: the order it first read them, new files after.

Staging cuts a source into positional shards (``staging``), so a file added to a folder must not move the
documents of the files already ingested. A source read from files (a folder, a glob) is read in name order
the first time; ``state.json`` records its files in the order they were read (the fingerprint), and a later
run reads those files first, in that order, and the files added since after them, in name order. A file
added to a folder is then appended, whatever its name, and goes into continuation shards.

A file already ingested that was removed or changed since is named when a finished shard's documents no
longer come out the same (``changed_files``): the documents in the index are never changed by a re-run, unless it
syncs (``flows.ingestion.resync``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from flows.ingestion.errors import FOLLOW_ADVICE
from operators.base import Source
from operators.sources.paths import glob_stem, resolve_paths


def source_files(op: Source, params: dict[str, Any]) -> list[Path] | None:
    """The files the source reads (``params``: its params, paths absolute), in name order; None when it reads no
    files or they cannot be listed (the source raises its own error when it reads)."""
    try:
        if "folder" in params:
            return sorted(Path(params["folder"]).glob("corpus.jsonl*"))
        if "path" in params:
            return resolve_paths(params["path"], op=op)
    except Exception:  # noqa: BLE001 - the source raises its own error when it reads
        return None
    return None


def files_read_order(files: list[Path] | None, params: dict[str, Any],
                     state: dict[str, Any] | None) -> list[str] | None:
    """The absolute paths of the source's ``files`` (``source_files``) in the order to read them: those of the
    staging ``state`` (a previous run's, maybe of the same files at another path) first, in its order, then the
    others by name. None: the source reads no files, or has no previous order (its own order is name order then)."""
    if state is None or not state.get("fingerprint") or not isinstance(params.get("path"), str) or files is None:
        return None
    current = [str(p) for p in files]
    recorded = list(recorded_here(state, params, current))
    present = set(current)
    first = list(dict.fromkeys(p for p in recorded if p in present))
    known = set(first)
    return first + [p for p in current if p not in known]


def recorded_here(state: dict[str, Any], params: dict[str, Any], current: list[str]) -> dict[str, tuple]:
    """The files of the staging ``state`` (path to size and time), named as the source at ``params['path']``
    names them: a state written from another path (the file moved, or the folder then read by a glob) holds the
    same files under their names there. ``moved`` reads them so too, to tell which files changed."""
    recorded = {str(entry[0]): tuple(entry[1:]) for entry in state["fingerprint"]}
    theirs, ours = (state.get("params") or {}).get("path"), params.get("path")
    if not isinstance(theirs, str) or not isinstance(ours, str) or theirs == ours:
        return recorded
    old, new = _root(theirs, list(recorded)), _root(ours, current)
    return {str(new / Path(p).relative_to(old)): v for p, v in recorded.items() if Path(p).is_relative_to(old)}


def _root(pattern: str, files: list[str]) -> Path:
    """The folder ``pattern``'s files are named from: a glob's fixed folders, a folder itself (one that may be
    gone: it holds the files), a file's own folder."""
    stem, rest = glob_stem(pattern)
    if rest or stem.is_dir() or (files and all(Path(f).is_relative_to(stem) and Path(f) != stem for f in files)):
        return stem
    return stem.parent


def in_order(splits: Iterable[Any], order: list[str] | None) -> list[Any]:
    """The source's splits sorted by their file's place in ``order`` (a file's splits keep their own order);
    splits without a file (a source read whole, with ``limit``) and files not in it stay where they are, last."""
    splits = list(splits)
    if not order:
        return splits
    rank = {path: i for i, path in enumerate(order)}
    return sorted(splits, key=lambda split: rank.get(_split_file(split), len(rank)))


def _split_file(split: Any) -> str | None:
    path = split if isinstance(split, (str, Path)) else getattr(split, "path", None)
    return os.path.abspath(os.path.expanduser(str(path))) if path is not None else None


def ordered_fingerprint(fingerprint: list[list[Any]] | None, order: list[str] | None) -> list[list[Any]] | None:
    """The fingerprint's files in read order (the order a later run reads them in)."""
    if fingerprint is None or not order:
        return fingerprint
    rank = {path: i for i, path in enumerate(order)}
    return sorted(fingerprint, key=lambda entry: rank.get(entry[0], len(rank)))


#: Why a source's finished shard holds other documents when none of its files changed.
READ_OTHERWISE = " (none of its files changed since the last ingest: this release of Tessera reads them otherwise)"
#: Why a source's finished shards are not what it yields: another file that starts with its documents was ingested
#: since and continued it (``moved``), and is still there. A sync would delete the documents only that file holds.
_CONTINUED_LEAD = " (since the last ingest, the index follows "
CONTINUED = (_CONTINUED_LEAD + "{files}, which starts with this source's documents and added to them: ingest {files} "
             "to add to the index, or this source into a new index; a sync here would delete the documents only "
             "{files} holds)")


def follow_advice(changed: str) -> str:
    """What to do about a source whose finished shard it no longer yields, after ``changed`` (``changed_files``):
    none where another file continued it (``CONTINUED`` says what to do)."""
    return "" if changed.startswith(_CONTINUED_LEAD) else f"; {FOLLOW_ADVICE}"


#: Files that hold one document whatever their size (``operators.sources.file_text``): one cannot grow by documents.
_ONE_DOCUMENT = (".md", ".markdown", ".txt", ".html", ".htm")


def changed_files(state: dict[str, Any] | None, fingerprint: list[list[Any]] | None,
                  params: dict[str, Any]) -> str:
    """The files of the previous staging ``state`` removed or changed (size, time) since, as a clause for an
    error ("" when none). A state written from another path (the folder, then a glob of it) names its files as
    this source names them (``recorded_here``), so the file that changed is named whichever of them ran last."""
    if state is None or not state.get("fingerprint") or fingerprint is None:
        return ""
    now = {entry[0]: tuple(entry[1:]) for entry in fingerprint}
    recorded = recorded_here(state, params, list(now))
    gone = [path for path in recorded if path not in now]
    removed = [path for path in gone if not os.path.exists(path)]
    unread = [path for path in gone if path not in removed]  # there, but the source does not read it (a folder
    changed = [path for path, was in recorded.items() if path in now and now[path] != was]  # after its glob)
    if unread and not removed and not set(recorded) & set(now):  # another file, still there, continued it
        return CONTINUED.format(files=_names(unread))
    parts = [f"{what}: {_names(paths)}" for what, paths in (("removed", removed), ("no longer read", unread),
                                                            ("changed", changed)) if paths]
    if len(now) > 1 and any(not p.lower().endswith(_ONE_DOCUMENT) for p in changed):  # a record appended to a.jsonl
        # of a folder is read before b.jsonl's documents (a page added to a PDF too; not so a Markdown file's one)
        parts.append("documents added to one file of several take the places of the files read after it: add "
                     "them as a new file")
    if not parts and recorded:  # the same files, other documents: read otherwise since (an HTML page's furniture)
        return READ_OTHERWISE
    return f" (since the last ingest, {'; '.join(parts)})" if parts else ""


def _names(paths: list[str]) -> str:
    return ", ".join(paths[:10]) + (f" and {len(paths) - 10} more" if len(paths) > 10 else "")
