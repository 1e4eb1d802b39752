"""An index's unfinished ingestions: sources staged under ``<index>/_ingest/<key>/`` whose shards the manifest
does not all list yet (an ingest that was interrupted or crashed, or one that runs now).

A search of such an index sees only the committed part of the corpus, so ``tessera index info`` reports each
one (shards done and planned, and the command that resumes it) and ``tessera run`` warns. The library itself
stays quiet: these functions only read. ``has_staged`` is the cheap test (a directory listing, no manifest);
``unfinished`` compares the staging plan (``state.json``, ``flows.ingestion.staging``) with the manifest.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Any

from flows.ingestion.staging import STAGING_DIR, STATE_FILE

#: A folder under ``_ingest/`` that is not a source's staging (the fault hooks' markers).
_NOT_A_SOURCE = ("faults",)


def _source_dirs(index_path: str | Path) -> list[Path]:
    try:
        with os.scandir(Path(index_path) / STAGING_DIR) as entries:
            return sorted(Path(e.path) for e in entries if e.is_dir() and e.name not in _NOT_A_SOURCE)
    except (FileNotFoundError, NotADirectoryError):
        return []


def _staged(folder: Path) -> list[str]:
    """The shard ids staged in ``folder`` (a shard's file is deleted once the manifest lists it)."""
    try:
        return sorted(name[: -len(".parquet")] for name in os.listdir(folder) if name.endswith(".parquet"))
    except FileNotFoundError:
        return []


def has_staged(index_path: str | Path) -> bool:
    """Whether some source's shards wait in ``_ingest/`` (cheap: no manifest is read)."""
    return any(_staged(folder) for folder in _source_dirs(index_path))


def unfinished(index_path: str | Path) -> list[dict[str, Any]]:
    """One record per source whose planned shards are not all committed: ``source``, ``shards_planned`` (None
    when staging itself was cut short), ``shards_done``, ``shards_pending``, ``docs_pending`` and ``resume``."""
    from flows.ingestion.ledger import finished_shards
    from operators.store import Index

    folders = _source_dirs(index_path)
    if not folders:
        return []
    index = Index.open(index_path)
    finished = finished_shards(index)
    found = []
    for folder in folders:
        state = _read_json(folder / STATE_FILE)
        planned = {s["id"]: s.get("docs") for s in state.get("shards", [])} if state else None
        pending = [s for s in (planned if planned is not None else _staged(folder)) if s not in finished]
        if not pending:
            continue
        params = (state or {}).get("params") or {}
        source = params.get("path") or params.get("folder")
        found.append({
            "source_key": folder.name,
            "source": source,
            "shards_planned": None if planned is None else len(planned),
            "shards_done": None if planned is None else len(planned) - len(pending),
            "shards_pending": len(pending),
            "docs_pending": None if planned is None else sum(planned[s] or 0 for s in pending),
            "resume": _resume_command(index, source, state, _read_json(folder / "job.json")),
        })
    return found


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def _resume_command(index, source: str | None, state: dict | None, job: dict | None) -> str:
    """The ``tessera ingest`` that resumes it, with the index's own settings (a custom --spec is not known)."""
    words = ["tessera", "ingest", "--source", source or "SOURCE", "--index", str(index.path)]
    if state and state.get("shard_size"):
        words += ["--shard-size", str(state["shard_size"])]
    words += [flag for flag, off in (("--no-dense", not index.settings.dense), ("--no-bm25", not index.settings.bm25),
                                     ("--no-chunk", job is not None and job.get("chunk") is None)) if off]
    return shlex.join(words)


def describe(record: dict[str, Any]) -> str:
    """One line for a person: what is unfinished and how to resume it."""
    if record["shards_planned"] is None:
        done = f"staging was cut short, {record['shards_pending']} shard(s) staged and not committed"
    else:
        done = (f"{record['shards_done']} of {record['shards_planned']} shard(s) committed, "
                f"{record['docs_pending']} document(s) not yet in the index")
    return (f"unfinished ingestion of {record['source'] or record['source_key']} ({done}; interrupted, or still "
            f"running); resume: {record['resume']}")
