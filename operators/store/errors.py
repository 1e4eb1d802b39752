"""Errors of the on-disk index; each names the index path, shard, field or value at fault."""

from __future__ import annotations

from typing import Any

from operators.errors import SpecError, TesseraError


class IndexStoreError(TesseraError):
    """Base of every index error."""


class IndexArgumentError(IndexStoreError, SpecError):
    """``flows.api.Index(x)`` or ``Index.open(x)`` given no index's folder or name (None, a number): one class for
    both, a ``SpecError`` as the Python API's other bad arguments are and an ``IndexStoreError`` as ``Index.open``'s
    other refusals are, so an except-clause for either catches it from either call."""


class IndexNotFoundError(IndexStoreError):
    """No index at the given path (no manifest.json)."""


class ManifestLostError(IndexNotFoundError):
    """A folder with shards that some commit recorded but no manifest.json: an index whose manifest is lost, not an
    empty folder (``layout.lost_manifest``)."""


class UnfinishedFirstIngestError(IndexNotFoundError):
    """A folder without a manifest whose ``_ingest/`` stages a source: the first ingestion into it, interrupted (or
    still running) before its first commit (``layout.unfinished_first_ingest``), not a place to "build one".
    ``path``, ``staging`` (the source's staging folder) and ``source``: the facts ``flows.ingestion.first_ingest``
    words the command that resumes it from, where the error reaches a command; the store cannot say it (the ingest
    options, a spec of the run's reader, are flows')."""

    def __init__(self, path, staging, source: str | None):
        self.path, self.staging, self.source = path, staging, source
        super().__init__(f"no index at {path} yet: its first ingestion, of {source or staging.name}, was interrupted "
                         "(or still runs) before it committed a shard; the command that started it resumes it")

    def __reduce__(self):  # rebuilt from its own arguments (an error a Ray worker raised travels pickled)
        return type(self), (self.path, self.staging, self.source), self.__dict__


class IndexCorruptError(IndexStoreError):
    """The manifest or a shard's files are unreadable or do not match their checksums."""


class IndexExistsError(IndexStoreError):
    """``Index.create`` found an index with other settings at the path."""


class ShardDataError(IndexStoreError):
    """Chunks handed to ``write_shard`` are unusable (missing column, wrong dim, duplicate docno...)."""


class CommitError(IndexStoreError):
    """A commit would break the index (unwritten shard, docno already live, lost race). ``detail``: what is wrong;
    ``advice``: what the caller can do about it, or None; the message says both. An ingestion that records the
    refusal (``flows.ingestion.refused``) keeps the detail and gives its own advice."""

    def __init__(self, detail: str, *, advice: str | None = None, **where):
        self.detail, self.advice = detail, advice
        super().__init__(f"{detail}; {advice}" if advice else detail, **where)


class ColumnTypeConflictError(IndexStoreError):
    """Shards whose doc-store column types do not merge, or merge to a type that cannot hold one's values (committed
    before commits checked them), so rows of both cannot be read into one table; ``column_types.type_conflict_error``
    names the column and the shards. ``detail``: the message without the index's path (the service names the
    index by its name)."""

    def __init__(self, path, detail: str, *, field: str | None = None):
        self.path, self.detail = path, detail
        super().__init__(f"index {path}: {detail}", field=field)

    def __reduce__(self):  # rebuilt from its own arguments (an error a Ray worker raised travels pickled)
        return type(self), (self.path, self.detail), self.__dict__


class CommitConflictError(CommitError):
    """Another commit landed while a commit that expected one generation was prepared (``compact`` retries)."""


class DocnoNotFoundError(IndexStoreError):
    """``documents()`` was asked for docnos that are not live in the index."""


class IndexWriteError(IndexStoreError):
    """The disk refused a write into the index (full, over quota, read-only, permission): nothing of that write was
    committed (``disk.refused_by_disk``)."""


def listed_ids(ids: Any, name: str) -> Any:
    """``ids`` as given, but one text refused: ``delete(doc_ids="ab")`` deleted the documents "a" and "b" and kept
    the one it named."""
    if isinstance(ids, (str, bytes)):
        raise CommitError(f"{name} is a list of ids, not one text ({ids!r}): give [{ids!r}]", field=name)
    return ids


#: Settings that only an index with vectors reads.
_DENSE_ONLY = frozenset({"dense_type", "dense_options", "encoder", "dim"})


def settings_mismatch(path: Any, ours: dict[str, Any], theirs: dict[str, Any]) -> str:
    """Why an index cannot be opened with other settings than it has: what differs, or, where only vector
    settings differ from an index of none, that they do not apply (it said "it has dense_type: flat" of an index
    that holds no vectors)."""
    import json

    differ = [k for k in ours if ours[k] != theirs.get(k)]
    if not theirs.get("dense") and not ours.get("dense") and set(differ) <= _DENSE_ONLY:
        which = f"{differ[0]} does not apply to it: leave it" if len(differ) == 1 else \
            f"{', '.join(differ)} do not apply to it: leave them"
        return f"the index at {path} holds no vectors (BM25 alone): {which} out, or make another index with vectors"
    has = ", ".join(f"{k}: {json.dumps(theirs.get(k))}" for k in differ)
    asked = ", ".join(f"{k}: {json.dumps(ours[k])}" for k in differ)
    return (f"an index with other settings exists at {path}: it has {has}, and this asks for {asked}; keep its "
            "settings, or use another index")


def passage_hint(unknown: list[str], live: set[str]) -> str:
    """What to add to a refusal to delete the ids ``unknown``: where one is a passage's docno (``DOC_ID#N``, as a
    search shows it), that delete takes its document's id, named where the index holds it; where one differs from
    an id the index holds only in case (``A.TXT`` for ``a.txt``, as Windows and macOS match file names), that id."""
    passages = [doc_id for doc_id in unknown if "#" in doc_id]
    if not passages:
        return _case_hint(unknown, live)
    base = passages[0].rsplit("#", 1)[0]
    named = f": {base!r} for {passages[0]!r}" if base in live else ""
    return f" (a passage's docno is DOC_ID#N: delete takes the DOC_ID{named})"


def _case_hint(unknown: list[str], live: set[str]) -> str:
    """`` (ids are case-sensitive: the index holds 'a.txt' for 'A.TXT')``, for the first of ``unknown`` that a held
    id matches but for case; else empty."""
    folded = {doc_id.casefold() for doc_id in unknown}
    held: dict[str, list[str]] = {}
    for doc_id in live:
        if doc_id.casefold() in folded:
            held.setdefault(doc_id.casefold(), []).append(doc_id)
    first = next((doc_id for doc_id in unknown if doc_id.casefold() in held), None)
    if first is None:
        return ""
    named = ", ".join(map(repr, sorted(held[first.casefold()])[:3]))
    return f" (ids are case-sensitive: the index holds {named} for {first!r})"
