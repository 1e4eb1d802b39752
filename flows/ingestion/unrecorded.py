"""Finished shards that staging cannot check against their record in the source's ``state.json``.

A finished shard the source no longer reaches (records, or a file, removed from its end) is refused like a changed
one (``lost_shards``): dropped from ``state.json`` unchecked, its id would stay finished with no record, and the
documents appended later would be taken for its own, counted as done and never ingested.

A finished shard that ``state.json`` does not record (the state was deleted, damaged, as
``errors.read_staging_json`` says to; or an earlier release dropped it as above) is compared with the documents
the index holds for it (``committed_prefix``): the source's rows that are its documents, and no more, are the
finished shard; those after them are new, staged as its continuation and ingested.
"""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from flows.ingestion.errors import SourceChangedError
from flows.ingestion.file_order import follow_advice
from flows.ingestion.ledger import Ledger
from operators.store import shard as shard_io
from operators.store.layout import SHARDS


def shard_pattern(key: str) -> re.Pattern:
    """A shard id of the source staged under ``key``: ``<key>-<k:05d>``, from a sync on ``<key>-<k:05d>r<g>``, a
    continuation of either ``...<id>.<n>``. Groups: slice, generation, part."""
    return re.compile(rf"{re.escape(key)}-(\d{{5}})(?:r(\d+))?(?:\.(\d+))?")


def source_key_of(shard: str | None) -> str:
    """The source key of a shard id: ``<key>-<n>`` (or ``<key>-<n>.<part>``) for staged shards,
    ``retry-<key>-...`` for retries."""
    parts = (shard or "").split("-")
    if parts[0] == "retry" and len(parts) > 2:
        return "" if parts[1] == "none" else parts[1]
    return parts[0] if len(parts) > 1 else ""


def source_shards(key: str, shards: set[str]) -> set[str]:
    """Those of ``shards`` that belong to the source staged under ``key``."""
    own = shard_pattern(key)
    return {s for s in shards if own.fullmatch(s)}


def lost_shards(key: str, finished: set[str], staged: set[str]) -> list[str]:
    """The finished shards of the source staged under ``key`` that are not among its ``staged`` ones, in order."""
    own = shard_pattern(key)
    found = [(int(m[1]), int(m[2] or 0), int(m[3] or 0), s) for s in finished - staged if (m := own.fullmatch(s))]
    return [s for *_, s in sorted(found)]


def slice_of(shard: str) -> int:
    """The slice (``k``) of a shard id ``<key>-<k:05d>``, with a sync's ``r<g>`` or a continuation's ``.<n>``."""
    return int(shard.rsplit("-", 1)[1][:5])


def lost_error(shard: str, known: dict[str, dict], shard_size: int, changed: str) -> SourceChangedError:
    """The refusal of a source that ends before its finished ``shard`` (``known``: the shards ``state.json``
    records; ``changed``: the files removed or changed since, as ``file_order.changed_files`` says them)."""
    base, _, part = shard.partition(".")
    first = slice_of(shard) * shard_size  # after the parts of its slice before it
    first += sum((known.get(f"{base}.{i}" if i else base) or {}).get("docs", 0) for i in range(int(part or 0)))
    n = (known.get(shard) or {}).get("docs", 0)
    where = f"documents {first} to {first + n - 1}" if n else f"from document {first}"
    unrecorded = "" if known else (  # no state.json: the shard size is this run's, maybe not the first run's
        f"; or its staging state (state.json) is gone and the first ingestion cut shards of another size than "
        f"{shard_size}: give that --shard-size again")
    return SourceChangedError(f"shard {shard} ({where}) is in the index, but the source now ends before it"
                              f"{changed}{follow_advice(changed)}{unrecorded}")


def committed_prefix(index_path: str | Path, shard: str, rows: pa.Table) -> tuple[int, bool] | None:
    """How many of the leading ``rows`` are documents finished ``shard`` was committed with, and whether they are
    all of them (False: the source yields other documents there). None when the index cannot say: the shard's
    folder is gone (a compaction merged it) and the ledger does not finish it."""
    ids = committed_ids(index_path, shard)
    if ids is None:
        return None
    docnos = [str(d) for d in rows.column("docno").to_pylist()] if "docno" in rows.column_names else []
    n = next((i for i, d in enumerate(docnos) if d not in ids), len(docnos))
    return (n, True) if set(docnos[:n]) == ids else (max(len(ids), 1), False)


def committed_ids(index_path: str | Path, shard: str) -> set[str] | None:
    """The ids of the documents in ``shard``'s folder and those its attempt failed (chunk, embed; a shard of
    failures alone has no folder)."""
    ledger = Ledger(index_path)
    failed = {i.removeprefix("doc:") for i in ledger.failed_ids(shard) if i.startswith("doc:")}
    folder = Path(index_path) / SHARDS / shard
    if not (folder / shard_io.DOCS_FILE).exists():
        return failed if shard in ledger.empty_shards() else None
    return failed | {str(d) for d in shard_io.read_docs(folder, ["doc_id"]).column("doc_id").to_pylist()}
