"""A source found at another path than the one it was ingested from: a file moved or copied, or a Ray job's
upload folder (``.../_ray_pkg_<hash>/``, which changes with every submission). It is recognised by its
documents, so its finished shards are not ingested again.

Staging keys a source by its read step's params, path included (``staging.source_key``). When that key has no
staging state in the index but the index holds finished shards of a source read with the same params from another
path, the new source's first shard is read and its digest compared with theirs: the same documents are the same
corpus, and the run resumes under the key it was first ingested with (documents appended since go into new
shards, as for a source that did not move). One that reads every file the other read, at the same paths (a glob
of an ingested folder), is that source without the comparison, so a file changed since is named by staging. Its
files are read in the order the other source read them (``file_order``), so a file ingested alone and then its
folder, the file first, is one source too: the folder's other files are appended to it.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator

from flows.ingestion.digests import docs_digest
from flows.ingestion.errors import SourceChangedError
from flows.ingestion.file_order import files_read_order, recorded_here, source_files
from flows.ingestion.ledger import Failure, Ledger
from flows.ingestion.reading import iter_documents
from flows.ingestion.staged_files import READ_ONLY_PARAMS, keyed_as, source_params, staging_dir
from flows.ingestion.staging import STAGING_DIR, STATE_FILE
from flows.ingestion.unrecorded import source_shards
from flows.ingestion.where_now import ids_here
from operators.base import Source
from operators.sources._documents import QuietNotes
from operators.tables import concat

#: Params that say where the source is, not what it reads.
_LOCATION_PARAMS = ("path", "folder")


def earlier_key(op: Source, index_path: str | Path, shard_size: int | None, finished: set[str]) -> str | None:
    """The staging key under which the index holds this source's documents, read from another path (None: the
    source's own key has finished shards, or no finished source read the same way reads the same files or starts
    with the same documents). Found, it removes what the source staged under its own key, which is nothing the
    index holds: a run refused since (its documents are live under the other key), or it would never match again."""
    staging = Path(index_path) / STAGING_DIR
    own = staging_dir(op, index_path)
    if not staging.is_dir() or any(s.startswith(own.name + "-") for s in finished):
        return None
    key = _matching_key(op, index_path, shard_size, finished)
    if key is not None and key != own.name and own.is_dir():
        shutil.rmtree(own, ignore_errors=True)
    return key


def _matching_key(op: Source, index_path: str | Path, shard_size: int | None,
                  finished: set[str]) -> str | None:
    """``earlier_key``'s search: a finished source read the same way from the same files (a folder and then a
    glob of it: one whose file changed since is then refused naming it, not as live documents of another source),
    else one whose first shard holds the documents this one starts with."""
    params = source_params(op)
    files, candidates = source_files(op, params), []
    present = {str(p) for p in files or ()}
    failed = None  # the index's unreadable lines, read once: each candidate's first shard is compared without its own
    for key, state in _read_alike(op, params, index_path):
        first = next((s for s in state.get("shards", []) if s.get("index") == 0), None)
        # a sync that restaged it may have been cut short before its new first shard's commit: its retired ones are
        started = first is not None and (first.get("id") in finished or state.get("syncing"))
        if started and shard_size in (None, state.get("shard_size")):  # None: as it was staged
            theirs = {str(entry[0]) for entry in state.get("fingerprint") or () if os.path.exists(entry[0])}
            if theirs and theirs <= present:  # (a file removed since is named by staging too)
                _refuse_renamed(op, params, state, theirs)
                return key
            if _moved_here(state, params, files):  # a folder moved, then edited in its first shard
                return key
            order = files_read_order(files, params, state)  # their files first, in their order
            failed = Ledger(index_path).read_failures(finished) if failed is None else failed
            own = source_shards(key, finished)
            skip = ids_here([f for f in failed if f.shard in own], state, params)
            candidates.append((key, first.get("digest"), first.get("docs") or state.get("shard_size"), order, skip))
    digests: dict[tuple, str] = {}  # a first shard may be partial: compare the documents it recorded
    for key, theirs, docs, order, skip in candidates:  # without the lines it failed on, fixed since or not
        at = (docs, tuple(order or ()), skip)
        if at not in digests:
            digests[at] = first_shard_digest(op, docs, order, skip)
        if digests[at] == theirs:
            return key
    return None


def _refuse_renamed(op: Source, params: dict[str, Any], state: dict[str, Any], files: set[str]) -> None:
    """A source that names its documents by their paths (PDF, text, Markdown, HTML files) from another folder than
    the ingested source that read the same files (a subfolder, then a glob of its parent): resumed as that source,
    it was refused naming its files as "removed" at paths that never were; as a source of its own, its documents
    would be in the index twice, under two names."""
    from operators.sources.paths import path_root
    from operators.sources.pdf import PdfSource, relative_name

    ours, theirs = params.get("path"), (state.get("params") or {}).get("path")
    if not (isinstance(op, PdfSource) and isinstance(ours, str) and isinstance(theirs, str)):
        return
    our_root, their_root = path_root(ours), path_root(theirs)
    if our_root == their_root:
        return
    file = Path(min(files))
    raise SourceChangedError(
        f"the files {theirs} read are in the index already, named from {their_root} ('{relative_name(file, theirs)}'); "
        f"{ours} names them from {our_root} ('{relative_name(file, ours)}'), so their documents would be in the index "
        f"twice, under both names: ingest {ours} into a new index, or its other files as sources of their own (globs "
        f"that leave {their_root} out)", field="source")


def _moved_here(state: dict[str, Any], params: dict[str, Any], files: list[Path] | None) -> bool:
    """Whether ``files`` are those the staging ``state`` recorded, moved to another folder: none of those is left
    where it was, and most of them are here under the same names (from the folder's root) with the same sizes and
    times, which ``mv`` keeps. An edit to its first shard then does not make a moved folder another source (whose
    documents are live under the old one): staging names the edited file, and a sync follows it."""
    fingerprint = state.get("fingerprint") or []
    if not files or len(fingerprint) < 2 or any(os.path.exists(entry[0]) for entry in fingerprint):
        return False  # one file moved and edited is not told from another; one still there is copied, not moved
    now = {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in files}
    recorded = recorded_here(state, params, list(now))
    return 2 * sum(1 for path, was in recorded.items() if now.get(path) == tuple(was)) > len(fingerprint)


def first_shard_digest(op: Source, shard_size: int, order: list[str] | None = None,
                       skip: frozenset[str] = frozenset()) -> str:
    """The digest of the source's first ``shard_size`` documents (its files read in ``order``, the lines ``skip``
    left out), as staging computes it for shard 0."""
    tables, rows = [], 0
    for item in iter_documents(op, skip, order=order, notes=QuietNotes()):  # to compare: its warnings are staging's
        if isinstance(item, Failure) or item.num_rows == 0:
            continue
        tables.append(item.select([c for c in ("docno", "text") if c in item.column_names]))  # what the digest reads
        rows += item.num_rows
        if rows >= shard_size:
            break
    if not tables:  # no documents: no shard to compare
        return ""
    return docs_digest(concat(tables).slice(0, shard_size))


def read_alike(op: Source, index_path: str | Path, finished: set[str]) -> list[str]:
    """The paths that the index's other sources read the same way as ``op`` (same reader and params but where) were
    last read from, those with finished shards: where a source new at its path may have been moved from."""
    here = staging_dir(op, index_path).name
    return [_location(state.get("params") or {}, key) for key, state in _read_alike(op, source_params(op), index_path)
            if key != here and any(s.startswith(key + "-") for s in finished)]


def _read_alike(op: Source, params: dict[str, Any], index_path: str | Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each staged source of the index (its key and ``state.json``) read as ``op`` with ``params`` reads: the same
    reader and params, wherever from."""
    ours, name = _what_it_reads(params), keyed_as(op.name)
    for state_file in sorted((Path(index_path) / STAGING_DIR).glob(f"*/{STATE_FILE}")):
        try:
            state = json.loads(state_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if keyed_as(state.get("source")) == name and _what_it_reads(state.get("params") or {}) == ours:
            yield state_file.parent.name, state


def _what_it_reads(params: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k not in _LOCATION_PARAMS and k not in READ_ONLY_PARAMS}


def last_path(index_path: str | Path, key: str) -> str:
    """The path the source staged under ``key`` was last read from, for a message (its key when unrecorded)."""
    try:
        state_file = Path(index_path) / STAGING_DIR / key / STATE_FILE
        params = json.loads(state_file.read_text(encoding="utf-8")).get("params") or {}
    except (OSError, ValueError, AttributeError):
        return key
    return _location(params, key)


def _location(params: dict[str, Any], key: str) -> str:
    """Where the source of these read params is (its key when they do not say)."""
    return next((str(params[p]) for p in _LOCATION_PARAMS if params.get(p)), key)
