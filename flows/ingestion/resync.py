"""``--sync``: the index follows a source whose documents were edited or removed since they were ingested.

Without it, staging refuses a source whose finished shards' documents changed (``SourceChangedError``): the index
never changes what it holds behind a user's back. With it, the first finished shard whose documents changed (or
that the source no longer reaches) and every later shard of the source are *retired*, and the slices from that one
on are staged again under new shard ids, ``<key>-<k:05d>r<generation>``: a committed shard id is never used again
(a compaction keeps the ids it merged finished). The shards before it are kept as they are, not embedded again. Each
new shard's commit replaces the documents with its ids, so an edited document is swapped in one commit, and once
every shard is committed the retired shards' documents that the source no longer yields (a removed file's) are
deleted, and their recorded failures resolved. ``state.json`` records the generations (``resyncs``), the shards
every sync retired (``retired``: no longer the source's), and until the end ``syncing`` with the shards this sync
retires (``retiring``: those whose documents it deletes), so an interrupted sync goes on with the next ingest of the
source, with ``--sync`` or without. A finished sync's shards are never looked at again: their documents are gone,
and an id of theirs may since be another source's.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from flows.ingestion.errors import SourceChangedError
from flows.ingestion.unrecorded import committed_ids, shard_pattern

log = logging.getLogger("tessera.ingest")
#: The folder of a source's staging that keeps its shards' document ids (``write_ids``).
IDS = "ids"


class Resync(Exception):
    """Raised while staging with sync: slice ``slice_index`` of the source changed (or is gone); stage again."""

    def __init__(self, slice_index: int):
        super().__init__(slice_index)
        self.slice_index = slice_index


@dataclass
class Generations:
    """The source's syncs, as ``state.json`` records them."""

    resyncs: list[list[int]] = field(default_factory=list)  # [first slice, generation], oldest first
    retired: set[str] = field(default_factory=set)  # by every sync
    retiring: set[str] = field(default_factory=set)  # by the sync under way
    syncing: bool = False

    @classmethod
    def of_state(cls, state: dict[str, Any] | None) -> "Generations":
        state = state or {}
        return cls([list(r) for r in state.get("resyncs", [])], set(state.get("retired", [])),
                   set(state.get("retiring", [])), bool(state.get("syncing")))

    def to_state(self) -> dict[str, Any]:
        if not self.resyncs and not self.syncing:  # a source never synced: its state.json as before
            return {}
        return {"resyncs": self.resyncs, "retired": sorted(self.retired), "retiring": sorted(self.retiring),
                "syncing": self.syncing}

    def shard_id(self, key: str, index: int) -> str:
        """The id of the source's shard ``index`` (slice): the generation of the latest sync from it or before."""
        generation = next((g for first, g in reversed(self.resyncs) if index >= first), 0)
        return f"{key}-{index:05d}" + (f"r{generation}" if generation else "")

    def retire(self, key: str, slice_index: int, finished: set[str]) -> list[str]:
        """Retire the source's finished shards of slice ``slice_index`` and after, and give those slices a new
        generation; returns the shards retired now, in order."""
        own = shard_pattern(key)
        found = sorted((int(m[1]), s) for s in finished - self.retired
                       if (m := own.fullmatch(s)) and int(m[1]) >= slice_index)
        self.retired.update(s for _, s in found)
        self.retiring.update(s for _, s in found)
        self.resyncs.append([slice_index, 1 + max((g for _, g in self.resyncs), default=0)])
        self.syncing = True
        return [s for _, s in found]


def write_ids(staging: Path, shard: str, docs: Any) -> None:
    """Record the ids of a staged shard's documents (``docs``, a table) in ``<staging>/ids/<shard>.txt``: kept once
    the shard is committed, so a sync knows them after a compaction merged the shard's folder into others."""
    from operators.atomic import write_bytes

    ids = [str(d) for d in docs.column("docno").to_pylist()] if "docno" in docs.column_names else []
    (staging / IDS).mkdir(parents=True, exist_ok=True)
    write_bytes(staging / IDS / f"{shard}.txt", json.dumps(ids).encode())


def drop_ids(staging: Path, shards: Iterable[str]) -> None:
    for shard in shards:
        (staging / IDS / f"{shard}.txt").unlink(missing_ok=True)


def retired_doc_ids(index_path: str | Path, staging: Path, retired: set[str]) -> set[str]:
    """The ids of the documents the ``retired`` shards were committed with (and those their attempts failed on):
    read from the shard's folder, or where a compaction merged it into others, from the ids staging recorded
    (``write_ids``). A shard merged by a compaction and staged by a release that recorded no ids: which documents
    it held is lost, so the sync cannot tell which of them to delete, and is refused before anything changes."""
    from operators.store import commit_shards
    from operators.store.layout import read_manifest

    merged = commit_shards.merged(read_manifest(Path(index_path)))
    ids: set[str] = set()
    for shard in sorted(retired):
        found = None if shard in merged else committed_ids(index_path, shard)
        recorded = staging / IDS / f"{shard}.txt"
        if found is None and recorded.exists():
            found = set(json.loads(recorded.read_text(encoding="utf-8")))
        if found is None:
            raise SourceChangedError(
                f"shard {shard} of this source was merged into others by `tessera index compact`, and it was "
                "ingested by a release that did not record its documents' ids, so a sync could not delete those "
                "the source no longer has; ingest the source into a new index", field="sync")
        ids |= found
    return ids


def finish(run: Any) -> None:
    """After a sync's last commit: delete the retired shards' documents that the source no longer yields, resolve
    the retired shards' failures, and record the sync as done (``run``: the ingestion's ``job._Run``)."""
    stager, generations = run.stager, run.stager.generations
    if not generations.syncing:
        return
    gone = (stager.retiring_ids - stager.doc_ids) & run.index.live_doc_ids()
    if gone:  # (live: a sync interrupted after it deleted them does not count them again)
        deleted = run.index.delete(doc_ids=gone)
        log.info("sync: %d document(s) the source no longer has deleted (%d passage(s))", len(gone), deleted)
    run.report.docs_deleted = len(gone)
    finished = run.finished()
    run.ledger.resolve_retired(generations.retiring, stager.own(finished), finished)
    retired, generations.syncing, generations.retiring = generations.retiring, False, set()
    stager.write_generations()
    drop_ids(stager.dir, retired)
