"""Manifests of an earlier format, read as this release's (``settings.FORMAT``).

Format 2 (2026-11-30) records ``merged_shards``: the ids of the shards compactions merged, which stay committed
(``commit_shards.finished``), so an ingestion run again skips them. A format-1 manifest has no such record, and a
compaction by a release before it lost those ids: read as they are, every shard an ingestion committed before the
compaction looked unfinished, and ingesting the source again was refused (its documents are live) or, with
``--replace``, embedded everything again and brought back the documents deleted since.

They are recovered from the ingestion staging, which outlives the compaction: ``<index>/_ingest/<key>/state.json``
lists every shard of a source, and a shard's staged documents (``<shard id>.parquet``) are deleted only once the
shard is finished (``flows.ingestion.staging``). A staged shard that the manifest does not list was merged when its
staged file is gone (or it was an empty shard, every document failed, which the failure ledger counts as finished
anyway), or when its file is still there (the run died between its commit and that delete) and every one of its
documents' ids is in the index, live or deleted. Any other staged shard is what it seems: unfinished.

``read_manifest`` upgrades what it reads (in memory: reads change nothing on disk, which may be read-only); the first
write, which reads the manifest under the index's lock, writes it as format 2 with ``merged_shards`` filled. A
format-1 manifest that no compaction touched upgrades with nothing to recover. Until that write, what was recovered is
kept in the process (``_RECOVERED``) for as long as the manifest and the staging's listing are the same, so each read
does not read every shard's document ids again.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from operators.store.settings import FORMAT, Manifest

#: The ingestion staging's names, defined here because the store reads the staging too and operators do not import
#: flows (``flows.ingestion.staging`` and ``pending`` import them). ``faults``: the test hooks' folder, no source.
STAGING_DIR, STATE_FILE = "_ingest", "state.json"
NOT_A_SOURCE = ("faults",)
#: How a compaction's shard ids start (``compaction`` names its shards with it): they tell a compacted index.
COMPACTED = "compact"
#: ``recovered_merged``'s answers by ``_recovery_key``: a few indices' worth, the oldest dropped first.
_RECOVERED: dict[tuple, frozenset[str]] = {}
_RECOVERED_MAX = 32
_RECOVERED_LOCK = threading.Lock()


def upgraded(path: Path, raw: dict, manifest: Manifest) -> Manifest:
    """``manifest`` (validated from ``raw``, the JSON of ``path``'s manifest) at this release's format, with the
    merged shards an earlier release's compaction did not record recovered."""
    if (raw.get("format") or 1) >= FORMAT:
        return manifest
    if compacted(manifest):
        manifest.merged_shards = sorted(set(manifest.merged_shards) | _recovered_once(path, manifest))
    manifest.format = FORMAT
    return manifest


def compacted(manifest: Manifest) -> bool:
    """Whether a compaction merged shards of the index: it lists (or recorded) a compaction's shard, or lists no
    shard at a later generation (a compaction of an index whose every document was deleted leaves none)."""
    ids = [s.id for s in manifest.shards] + list(manifest.merged_shards)
    return any(i.startswith(COMPACTED) for i in ids) or (not manifest.shards and manifest.generation > 0)


def _recovered_once(path: Path, manifest: Manifest) -> frozenset[str]:
    """``recovered_merged``, computed again only when what it reads changed (``_recovery_key``)."""
    key = _recovery_key(path, manifest)
    with _RECOVERED_LOCK:
        found = _RECOVERED.get(key)
    if found is None:
        found = frozenset(recovered_merged(path, manifest))
        with _RECOVERED_LOCK:
            while len(_RECOVERED) >= _RECOVERED_MAX:
                del _RECOVERED[next(iter(_RECOVERED))]
            _RECOVERED[key] = found
    return found


def _recovery_key(path: Path, manifest: Manifest) -> tuple:
    """What ``recovered_merged`` reads: the manifest's shards (each write of one has its own token; shard files never
    change once committed) and each staged source's files by name and inode (staging writes a file whole under a new
    inode, by a rename). Taken before the recovery reads them: a change meanwhile is a new key at the next read."""
    listing = []
    for folder in staged_sources(path):
        try:
            with os.scandir(folder) as entries:
                listing.append((folder.name, tuple(sorted((e.name, e.inode()) for e in entries))))
        except (FileNotFoundError, NotADirectoryError):
            continue
    return (str(path), manifest.created_at, manifest.generation, tuple((s.id, s.token) for s in manifest.shards),
            tuple(manifest.merged_shards), tuple(listing))


def recovered_merged(path: Path, manifest: Manifest) -> set[str]:
    """Ids of the staged shards the manifest does not list nor record that were committed, then merged (see the
    module docstring)."""
    known = {s.id for s in manifest.shards} | set(manifest.merged_shards)
    merged: set[str] = set()
    still_staged: dict[str, Path] = {}
    for folder in staged_sources(path):
        for shard_id in _planned(folder):
            if shard_id in known:
                continue
            staged = folder / f"{shard_id}.parquet"
            if staged.exists():
                still_staged[shard_id] = staged
            else:
                merged.add(shard_id)
    if still_staged:
        in_index = _doc_ids(path, manifest)
        merged |= {shard_id for shard_id, staged in still_staged.items() if _all_in(staged, in_index)}
    return merged


def staged_sources(index_path: str | Path) -> list[Path]:
    """The staging folder of each source ingested into the index at ``index_path``, by key."""
    try:
        with os.scandir(Path(index_path) / STAGING_DIR) as entries:
            return sorted(Path(e.path) for e in entries if e.is_dir() and e.name not in NOT_A_SOURCE)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _planned(folder: Path) -> list[str]:
    """The shard ids a source's staging planned (none without a readable ``state.json``: staging was cut short,
    before any of its shards could be committed)."""
    try:
        state = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
        return [str(s["id"]) for s in state.get("shards", [])]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return []


def _doc_ids(path: Path, manifest: Manifest) -> set[str]:
    """Every document id the index's shards hold, deleted ones too (a deleted document was ingested)."""
    from operators.store import shard as shard_io

    found: set[str] = set()
    for info in manifest.shards:
        table = shard_io.read_docs(path / "shards" / info.id, ["doc_id"])  # layout.SHARDS (layout imports this)
        if "doc_id" in table.column_names:
            found.update(str(d) for d in table.column("doc_id").to_pylist())
    return found


def _all_in(staged: Path, doc_ids: set[str]) -> bool:
    """Whether the staged shard has documents and the index holds every one of their ids."""
    try:
        docnos = pq.read_table(staged, columns=["docno"]).column("docno").to_pylist()
    except (OSError, KeyError, pa.ArrowInvalid):
        return False
    return bool(docnos) and all(str(d) in doc_ids for d in docnos)
