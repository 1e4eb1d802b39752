"""A refused ingestion: a commit the index turned down because of the source's documents (an id already live in the
index, a metadata column whose type clashes with the index's), recorded as ``<index>/_ingest/<key>/refused.json``.

Its staged shards stay (the finished ones are checked against them when the source is ingested again, so the
fixed file resumes where it stopped), but they are not an ingestion that was interrupted or still runs:
``flows.ingestion.pending`` reports them as refused, with the reason and what to do, instead of suggesting a
resume that would fail the same way. The next ingest of the source removes the record when it starts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable

import pyarrow as pa

from flows.ingestion.moved import read_alike
from operators.atomic import write_bytes
from operators.store.commits import live_refusal
from operators.store.errors import CommitConflictError, CommitError, IndexStoreError
from operators.store.layout import read_manifest

REFUSED_FILE = "refused.json"
#: Fields of a refusal that ``--replace`` lifts (the document's id is live in the index).
_REPLACEABLE = ("docno", "doc_id")


def is_refusal(error: BaseException) -> bool:
    """Whether ``error`` is the index refusing a commit because of the documents (it names their field), not a lost
    race or a fault of the run."""
    return (isinstance(error, CommitError) and not isinstance(error, CommitConflictError)
            and getattr(error, "field", None) is not None)


def record(folder: Path, shard: str, error: BaseException) -> None:
    """Record that the commit of ``shard`` staged in ``folder`` was refused with ``error``."""
    field = error.field
    reason = error.detail  # what to do is said by ``advice``, in the ingestion's own terms
    found = {"shard": shard, "field": field, "reason": reason, "before": _written(folder.parent.parent)}
    write_bytes(folder / REFUSED_FILE, json.dumps(found).encode())


def _written(index_path: Path) -> list[str] | None:
    """The write tokens of the index's shards now: what came in later is told by them, not by times (the record's
    file is stamped by its file system's clock, a shard by the clock of the process that wrote it)."""
    try:
        return sorted(shard.token for shard in read_manifest(index_path).shards)
    except (OSError, ValueError, IndexStoreError):
        return None  # judged by the times, as a record of an earlier release is


def record_or_forget(folder: Path, shard: str, error: BaseException, *, committed: bool) -> None:
    """Record the refusal of a source some of whose shards the index holds (``committed``); forget a source none of
    whose shards it holds: nothing of it is in the index, so it is no unfinished ingestion for every later search and
    ``index info`` to warn of (a glob of files already ingested under their folder), and ingesting it again stages
    it again."""
    if committed:
        record(folder, shard, error)
    else:
        shutil.rmtree(folder, ignore_errors=True)


def read(folder: Path) -> dict[str, Any] | None:
    """The refusal recorded in ``folder`` (``shard``, ``field``, ``reason``), or None."""
    found = _recorded(folder)
    return None if found is None else {key: value for key, value in found.items() if key != "before"}


def _recorded(folder: Path) -> dict[str, Any] | None:
    try:
        found = json.loads((folder / REFUSED_FILE).read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def superseded(index: Any, folder: Path, pending: list[str]) -> bool:
    """Whether every document of the refused source's ``pending`` shards came into ``index`` after the refusal, by
    another source's commits (the file at another path ingested with ``--replace``, ``tessera index update``):
    nothing of it is left to add, so it is no longer an unfinished ingestion. Documents that were live before the
    refusal (what it refused) do not count: those shards were in the index when it was recorded (their write tokens,
    ``before``; a record of an earlier release, without them: those older than its file)."""
    from flows.ingestion.staged_files import staged_ids

    try:
        since = (folder / REFUSED_FILE).stat().st_mtime
        ids = {d for shard in pending for d in staged_ids(folder / f"{shard}.parquet")}
    except (OSError, KeyError, pa.ArrowInvalid):  # a staged file gone or unreadable: say what the record says
        return False
    before = (_recorded(folder) or {}).get("before")
    known = set(before) if isinstance(before, list) else None
    newer = {s.id for s in index.manifest.shards if not s.id.startswith(folder.name + "-")
             and (s.token not in known if known is not None else s.created_at > since)}
    return bool(ids) and bool(newer) and ids <= index.live_doc_ids(lambda shard_id: shard_id in newer)


def clear(folder: Path) -> None:
    """Forget a refusal: the source is being ingested again."""
    (folder / REFUSED_FILE).unlink(missing_ok=True)


#: What lifts a sync's refusal of an id another source holds: ``--replace`` cannot (it is refused with ``--sync``, and
#: the next ingest goes on with the unfinished sync).
SYNC_ADVICE = ("a sync replaces its own source's documents only: give them other ids in this source, or take them "
               "out of the source that holds them (and sync it) first")


def advice(refusal: dict[str, Any], syncing: bool = False) -> str:
    """What lifts the refusal (of a sync, ``syncing``)."""
    if refusal.get("field") not in _REPLACEABLE:
        return "fix the file"
    return SYNC_ADVICE if syncing else "fix the file or add --replace"


def in_ingestion_terms(error: CommitError, sync: bool = False) -> CommitError:
    """The refusal ``error`` with what the ingestion's caller can do in place of the index's own advice (``upsert``,
    ``tessera index update``): the run is an ingest (a sync, ``sync``)."""
    if error.field not in _REPLACEABLE:
        return error
    return CommitError(error.detail, advice=SYNC_ADVICE if sync else "give the documents other ids, or replace the "
                       "index's copies: tessera ingest --replace (in Python, replace=True)", field=error.field)


def moved_and_changed(error: CommitError, op: Any, index_path: Path, finished: set[str]) -> CommitError:
    """The refusal of a sync at a path new to the index, whose documents are live under another source read the same
    way: most likely a folder moved (or renamed) whose first documents changed, so it was not recognised as that
    source (``moved.earlier_key`` compares the first shard); ``--replace`` would make it a second source."""
    where = read_alike(op, index_path, finished)
    if not where:
        return in_ingestion_terms(error, sync=True)
    return CommitError(error.detail, advice=f"a sync follows a source where it was ingested from, and this path is "
                       f"new to the index, while {' and '.join(where)} was read the same way (moved here, with its "
                       "first documents changed since?): sync it there (move it back), or ingest it into a new index",
                       field="sync")


def first_live(index: Any, staged: Iterable[tuple[str, Path]], own_key: str,
               leaving: set[str]) -> tuple[str, CommitError] | None:
    """The first of the ``staged`` shards (id, documents file) holding a document whose id is live in ``index``,
    with the refusal its commit would get, found before anything is embedded (a run that would stop there need not
    embed that shard, nor any after it). Live passages in the source's own shards (staging key ``own_key``: another
    ingest of it committed them) and of the ``leaving`` ids (the first commit deletes them) do not count, as at the
    commit (``other_sources``)."""
    from flows.ingestion.staged_files import staged_ids

    live = index.live_doc_ids(other_sources(own_key)) - leaving
    if not live:
        return None
    for shard, path in staged:
        try:
            ids = staged_ids(path)
        except FileNotFoundError:  # committed by another ingest of the source meanwhile
            continue
        clash = [d for d in ids if d in live]
        if clash:
            return shard, live_refusal(shard, clash, index.path, "doc_id")
    return None


def other_sources(own_key: str | None) -> Callable[[str], bool]:
    """Whether a commit refuses a document whose id is live in a shard (by its id): in any shard but those of the
    source whose staging key is ``own_key`` (another ingest of the source committed them). ``first_live`` checked
    before embedding; the commit checks again under the index's lock, where an ``Index.add`` that landed since is
    seen. ``own_key`` None (a retry, whose ids ``retry._unique`` checked against every shard): every shard."""
    return lambda shard_id: own_key is None or not shard_id.startswith(own_key + "-")
