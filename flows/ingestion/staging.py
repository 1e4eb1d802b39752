"""Staging: the source, cut into deterministic input shards on disk before any embedding.

The driver streams the read step's documents in source order and cuts them into shards of ``shard_size`` documents:
shard *k* holds documents ``k*shard_size`` to ``(k+1)*shard_size - 1``. A shard id is ``<source key>-<k:05d>``, the
key a hash of the source (operator, path, field mapping), so a second corpus ingested into the same index gets
shards of its own while the same corpus always gets the same ids. Each unfinished shard is written to
``<index>/_ingest/<key>/<shard>.parquet`` (temporary file, then rename), with the records that could not be read
after its documents beside it in ``<shard>.failures.json``; a shard is deleted from staging once the manifest lists
it.

``state.json`` (written last) records the shards, their document counts and a digest of their ids and texts. A later
run over an unchanged source (same params, same file sizes and times) reuses the staged shards without reading the
source again; if the source changed, it is staged again and every finished shard must come out with the same digest
(appending documents is fine; editing a finished shard's documents raises ``SourceChangedError``, or with sync
stages the source again from that shard on: ``flows.ingestion.resync``). A finished shard is compared on the
documents it recorded; documents after them in its slice (appended to a partial last shard) form a continuation
shard ``<shard id>.<n>``. A source that ends before a finished shard is refused too, and a finished shard
``state.json`` does not record is compared with the index (``flows.ingestion.unrecorded``). A source's files are
read in the order they were first staged, files added since after them (``flows.ingestion.file_order``), so a file
added to a folder is appended whatever its name; a finished shard that changed names the files removed or changed
since. Ids repeated within the source: ``flows.ingestion.duplicates``.

A record that cannot be read (a JSONL line, a CSV row, a file that cannot be read at all) becomes a ledger entry
naming its file and line instead of an error that stops the run (``flows.ingestion.records``), and is logged as a
warning (the first ``LOGGED_FAILURES``; repeated ids in one line per file).

The source's key, its staging folder and its staged files' names are ``flows.ingestion.staged_files``'s.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.parquet as pq

from flows.ingestion.column_types import LEFT_OUT_RULE, ColumnTypes, left_out
from flows.ingestion.digests import docs_digest, meta_digest
from flows.ingestion.errors import IngestError, SettingsMismatchError, SourceChangedError, read_staging_json
from flows.ingestion.file_order import (READ_OTHERWISE, changed_files, files_read_order, follow_advice,
                                        ordered_fingerprint, source_files)
from flows.ingestion.ledger import Failure, Ledger
from flows.ingestion.reading import ReadCount, Said, iter_documents, log_failure, log_notes, log_rest
from flows.ingestion.resync import Generations, Resync, drop_ids, retired_doc_ids, write_ids
from flows.ingestion.staged_whole import staged_whole
# keyed_as, READ_ONLY_PARAMS, staged_ids and the rest re-exported: they lived here before ``staged_files``
from flows.ingestion.staged_files import (READ_ONLY_PARAMS, docs_file, failures_file, keyed_as,  # noqa: F401
                                          read_staged, source_key, source_params, staged_ids, staging_dir)
from flows.ingestion.where_now import MOVED_FROM, ids_here, moved_from
from flows.ingestion.unrecorded import committed_prefix, lost_error, lost_shards, slice_of, source_shards
from operators.atomic import write_bytes
from operators.base import Source
from operators.store.upgrade import STAGING_DIR, STATE_FILE  # noqa: F401 - this module's names too
from operators.tables import concat

log = logging.getLogger("tessera.ingest")
#: Documents per shard of a source ingested for the first time (a source ingested before keeps its own).
DEFAULT_SHARD_SIZE = 5000


@dataclass
class StagedShard:
    """One input shard: its id, position and documents, and its unreadable records."""

    id: str
    index: int
    docs: int
    digest: str
    read_failures: int = 0
    meta: str | None = None  # digest of the titles and metadata (``meta_digest``); None in an older state

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "index": self.index, "docs": self.docs, "digest": self.digest,
                "read_failures": self.read_failures, "meta": self.meta}


def _fingerprint(files: list[Path] | None) -> list[list[Any]] | None:
    """Size and modification time of each file the source reads (``source_files``); None if it reads no files."""
    if files is None:
        return None
    return [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in files]


@dataclass
class _Open:
    tables: list[pa.Table] = field(default_factory=list)
    rows: int = 0
    failures: list[Failure] = field(default_factory=list)


#: What to do about records left out, in a Python caller's words (tessera ingest says --retry-failed; tessera
#: bench, whose index is built anew from a changed corpus, says otherwise).
RETRY_ADVICE = "fix them, then ingest again with retry_failed=True"
#: Why a finished source staged now yields other documents, when it was staged with ``replace=True`` and is not now.
REPLACED_BEFORE = (" (it was ingested with replace=True, which keeps the last copy of a repeated id: ingest it with "
                   "replace=True again, as then)")


class Stager:
    """Cuts one source into staged shards under ``<index>/_ingest/<source key>/``."""

    def __init__(self, op: Source, index_path: str | Path, shard_size: int | None, key: str | None = None,
                 duplicates: bool = False, sync: bool = False):
        """``key``: the staging key to use instead of the source's own (its documents' key when it moved,
        ``moved.earlier_key``). ``duplicates``: stage every copy of a repeated id (``--replace``: the last
        wins) instead of failing the later ones. ``sync``: stage the changed part of the source again instead of
        refusing it (``flows.ingestion.resync``); an unfinished sync of the source goes on without it.
        ``shard_size`` None: the one the source was staged with before, else ``DEFAULT_SHARD_SIZE``."""
        self.op = op
        self.duplicates = duplicates
        self.key = key or source_key(op)
        self.index_path = Path(index_path)
        self.dir = staging_dir(op, index_path, self.key)
        previous = self._previous()
        self.shard_size = shard_size or (previous or {}).get("shard_size") or DEFAULT_SHARD_SIZE
        self.params = source_params(op)
        self._changed = ""
        self.generations = Generations.of_state(previous)
        self.sync = sync or self.generations.syncing
        if self.generations.syncing and duplicates:  # --replace would be ignored by the sync that goes on
            raise IngestError("the last sync of this source was cut short: finish it first (ingest the source again, "
                              "with or without sync=True), then ingest with replace=True", field="replace")
        if self.generations.syncing and not sync:
            log.warning("the last sync of this source was cut short: it goes on (the source is followed as with "
                        "sync=True, and the documents it no longer has are deleted at the end)")
        self._logged = Said()  # unreadable records and file warnings logged: a sync's reading again, once
        self._notes: dict[str, list[str]] = {}  # a file's warnings, logged when its documents are staged (_close)
        self.doc_ids: set[str] = set()  # with sync: the ids of every document the source yields now
        self.retiring_ids: set[str] = set()  # with sync: those of the documents of the shards it retires
        self._state: dict[str, Any] = {}  # what stage() wrote to state.json
        self.reused = False  # stage() took the shards staged before, the source unchanged (not read again)

    def docs_path(self, shard: str) -> Path:
        return docs_file(self.dir, shard)

    def failures_path(self, shard: str) -> Path:
        return failures_file(self.dir, shard)

    def shard_id(self, index: int) -> str:
        return self.generations.shard_id(self.key, index)

    def own(self, shards: set[str]) -> set[str]:
        """Those of ``shards`` that are this source's (``shard_id``), but those a sync retired."""
        return source_shards(self.key, shards) - self.generations.retired

    @functools.cached_property
    def listed_files(self) -> list[Path] | None:
        """The files the source reads (``file_order.source_files``), listed once a run: staging reads them, and the
        run's end asks which they were (a folder of many files is not globbed twice)."""
        return source_files(self.op, self.params)

    def files(self) -> set[str]:
        """The absolute paths of the files the source reads (none for a source that reads no files)."""
        return {str(path) for path in self.listed_files or []}

    def load(self, shard: str) -> tuple[pa.Table, list[Failure]]:
        """A staged shard's documents and its unreadable records."""
        return read_staged(self.dir, shard)

    def discard(self, shard: str) -> None:
        """Forget a committed shard's staged files."""
        for path in (self.docs_path(shard), self.failures_path(shard)):
            path.unlink(missing_ok=True)

    def _previous(self) -> dict[str, Any] | None:
        return read_staging_json(self.dir / STATE_FILE)

    def stage(self, finished: set[str], on_docs: Callable[[int], None] | None = None) -> list[StagedShard]:
        """The source's shards; unfinished ones staged on disk (reused when the source is unchanged).

        The lines that the source's finished shards recorded as unreadable stay out of the documents even when
        fixed since, so later shards keep their documents (a fixed line enters by retry)."""
        previous = self._previous()
        finished = finished - self.generations.retired
        files = self.listed_files
        order = files_read_order(files, self.params, previous)  # the files already staged first, new ones after
        fingerprint = ordered_fingerprint(_fingerprint(files), order)
        if previous is not None and previous["shard_size"] != self.shard_size:
            done = [s["id"] for s in previous["shards"] if s["id"] in finished]
            if done:
                raise SettingsMismatchError(
                    f"this source was ingested with shard_size={previous['shard_size']} ({len(done)} shard(s) "
                    f"finished); use shard_size={previous['shard_size']} to resume or add to it", field="shard_size")
        if (previous is not None and previous.get("complete") and fingerprint is not None and not self.sync
                and previous["fingerprint"] == fingerprint and previous["params"] == self.params
                and previous["shard_size"] == self.shard_size
                and previous.get("duplicates", False) == self.duplicates):
            shards = [StagedShard(**s) for s in previous["shards"]]
            if all(s.id in finished or staged_whole(self.docs_path(s.id), self.failures_path(s.id)) for s in shards):
                self.reused = True  # nothing read: ``on_docs`` is not told of documents as if they were
                return shards
        known = {s["id"]: s for s in (previous or {}).get("shards", [])}
        self._changed = changed_files(previous, fingerprint, self.params)  # named if a finished shard changed
        if previous is not None and previous.get("duplicates") and not self.duplicates \
                and self._changed in ("", READ_OTHERWISE):  # the files are as they were: the flag differs
            self._changed = REPLACED_BEFORE
        read = ReadCount(on_docs)  # a sync reads the source again: its documents are counted once
        while True:
            skip = ids_here(Ledger(self.index_path).read_failures(self.own(finished)), previous, self.params)
            try:
                shards = self._restage(finished, known, read, skip, order)
                break
            except Resync as resync:
                retired = self.generations.retire(self.key, resync.slice_index, finished)
                log.warning("sync: the source changed from document %d on: its documents from there are ingested "
                            "again, in place of those of shard(s) %s", resync.slice_index * self.shard_size,
                            ", ".join(retired[:5]) + (f" and {len(retired) - 5} more" if len(retired) > 5 else ""))
                finished = finished - self.generations.retired
                read.restart()
        if self.generations.retiring:  # what they hold is known, or the sync is refused before any change
            self.retiring_ids = retired_doc_ids(self.index_path, self.dir, self.generations.retiring)
            self._drop_unplanned({s.id for s in shards})
        self._state = {"source": self.op.name, "params": self.params, "shard_size": self.shard_size,
                       "fingerprint": fingerprint, "complete": True, "duplicates": self.duplicates,
                       "shards": [s.to_dict() for s in shards]}
        if moved_from(previous, self.params):  # the paths it was read from before: its failures' files moved too
            self._state[MOVED_FROM] = moved_from(previous, self.params)
        self.write_generations()
        return shards

    def _drop_unplanned(self, planned: set[str]) -> None:
        """Remove what a pass before a sync's restaging staged under ids it no longer plans."""
        for path in self.dir.glob("*.parquet"):
            if (shard := path.name.removesuffix(".parquet")) not in planned:
                self.discard(shard)
                drop_ids(self.dir, [shard])

    def write_generations(self) -> None:
        """Write ``state.json``: the staged shards and the source's syncs (``resync.Generations``)."""
        state = {**self._state, **self.generations.to_state()}
        write_bytes(self.dir / STATE_FILE, json.dumps(state, indent=1).encode())

    def _restage(self, finished: set[str], known: dict[str, dict], on_docs: Callable[[int], None],
                 skip: frozenset[str], order: list[str] | None) -> list[StagedShard]:
        self.dir.mkdir(parents=True, exist_ok=True)
        shards: list[StagedShard] = []
        current, k, failed = _Open(), 0, 0
        types = ColumnTypes()  # a column of a number here and text there is text in every shard
        owned: set[str] = set()  # the source's fields named as the ingest's own columns: left out by prepare
        for item in iter_documents(self.op, skip, duplicates=self.duplicates, order=order, notes=self._notes):
            if isinstance(item, Failure):
                current.failures.append(item)
                failed += log_failure(item, failed, skip, self._logged)
                continue
            if item.num_rows == 0:
                continue
            owned.update(c for c in item.column_names if left_out(c))
            current.tables.append(types.fit(item))
            current.rows += item.num_rows
            on_docs(item.num_rows)
            if self.sync and "docno" in item.column_names:
                self.doc_ids.update(str(d) for d in item.column("docno").to_pylist())
            while current.rows > self.shard_size:  # cut on the next shard's first document, so
                table = concat([types.fit(t) for t in current.tables])  # failures stay after the document before
                rest = table.slice(self.shard_size)
                shards += self._close(k, table.slice(0, self.shard_size), current.failures, finished, known, skip)
                current, k = _Open(tables=[rest], rows=rest.num_rows), k + 1
        if current.rows or current.failures:
            shards += self._close(k, concat([types.fit(t) for t in current.tables]) if current.tables else None,
                                  current.failures, finished, known, skip)
        lost = lost_shards(self.key, finished, {s.id for s in shards})
        if lost and self.sync:
            raise Resync(slice_of(lost[0]))
        if lost:  # left out of state.json, its documents would no longer be checked, and those appended later
            raise lost_error(lost[0], known, self.shard_size, self._changed)  # would be counted as done
        self._make_text(shards, finished, types)
        if owned:
            where = self.params.get("path") or self.params.get("folder") or self.op.name
            log.warning("%s: field(s) %s are left out: they are named as columns the ingest or a search writes "
                        "itself (%s), which would replace them; rename them in the source to keep them", where,
                        ", ".join(sorted(owned)), LEFT_OUT_RULE)
        if failed:  # the records past the first lines, each file's repeated ids: a line each
            log_rest(self._logged)
        if failed:
            log.warning("%d record(s) of the source are left out, %s; each is in the index's failures.jsonl with its "
                        f"file and line, or the file alone ({RETRY_ADVICE})", failed, "the rest goes on" if any(
                            s.docs for s in shards) else "and the source has no other document")  # a whole file
        return shards

    def _unrecorded(self, shard: str, rows: pa.Table) -> dict[str, Any] | None:
        """The record of a finished shard that ``state.json`` lacks, from the documents the index holds for it
        (``unrecorded``); None when the index cannot say (a compaction merged it): the rows are taken as its."""
        found = committed_prefix(self.index_path, shard, rows)
        return None if found is None else {"docs": found[0], "digest": docs_digest(rows.slice(0, found[0]))
                                           if found[1] else ""}  # not all there: no digest matches

    def _make_text(self, shards: list[StagedShard], finished: set[str], types: ColumnTypes) -> None:
        """Write again the shards staged before a column was made text, with that column as text."""
        for shard in shards:
            path = self.docs_path(shard.id)
            if shard.id in finished or not types.text or not path.exists():
                continue
            if types.needs_text(pq.read_schema(path)):
                sink = pa.BufferOutputStream()
                pq.write_table(types.fit(pq.read_table(path)), sink)
                write_bytes(path, sink.getvalue().to_pybytes())

    def _close(self, index: int, docs: pa.Table | None, failures: list[Failure], finished: set[str],
               known: dict[str, dict], skip: frozenset[str]) -> list[StagedShard]:
        """Shard ``index``'s slice of the source: its finished parts checked, the rest staged as one shard.

        A finished shard keeps the documents it was committed with: the rows it recorded must come out the
        same, and rows after them (documents appended to a source whose last shard was partial) are staged
        as a continuation shard ``<shard>.<n>``, the next part of the same slice."""
        docs = docs if docs is not None else pa.table({"docno": pa.array([], pa.string()),
                                                      "text": pa.array([], pa.string())})
        base, out, start = self.shard_id(index), [], 0
        shard = base
        while shard in finished:
            recorded = known.get(shard) or self._unrecorded(shard, docs.slice(start))
            n = recorded["docs"] if recorded is not None else docs.num_rows - start
            head = docs.slice(start, n)
            digest, meta = docs_digest(head), meta_digest(head)
            other = recorded is not None and (head.num_rows < n or recorded["digest"] != digest)
            if other or (recorded is not None and recorded.get("meta") not in (None, meta)):
                if self.sync:
                    raise Resync(index)
                first = index * self.shard_size + start
                what = "other documents" if other else "other titles or metadata for its documents"
                raise SourceChangedError(
                    f"shard {shard} (documents {first} to {first + n - 1}) is in the index, but the source now "
                    f"yields {what} there{self._changed}{follow_advice(self._changed)}")
            out.append(StagedShard(id=shard, index=index, docs=n, digest=digest,
                                   read_failures=(recorded or {}).get("read_failures", 0), meta=meta))
            start += n
            failures = [f for f in failures if f.id not in skip]  # the rest: not recorded by a finished part
            if start >= docs.num_rows and not failures:
                return out
            shard = f"{base}.{len(out)}"
        rows = docs.slice(start)
        log_notes(self._notes, rows, self._logged)
        if failures:
            write_bytes(self.failures_path(shard), json.dumps([f.to_dict() for f in failures]).encode())
        else:
            self.failures_path(shard).unlink(missing_ok=True)
        sink = pa.BufferOutputStream()
        pq.write_table(rows.combine_chunks(), sink)
        write_bytes(self.docs_path(shard), sink.getvalue().to_pybytes())
        write_ids(self.dir, shard, rows)  # kept after the commit: a sync deletes by them once a compaction merged it
        return out + [StagedShard(id=shard, index=index, docs=rows.num_rows, digest=docs_digest(rows),
                                  read_failures=len(failures), meta=meta_digest(rows))]
