"""The chunk, enrich and embed params a source's finished shards were processed with (``job.json`` in its staging
folder): a resumed or grown source keeps them, so that its shards' passages and vectors are alike."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from flows.ingestion.errors import SettingsMismatchError, read_staging_json

log = logging.getLogger("tessera.ingest")

#: Embed params that change the vectors (others, such as batch sizes, may change on resume).
VECTOR_PARAMS = ("model", "input_column", "title_column", "normalize", "prompt")
JOB_FILE = "job.json"


def job_params(job: Any) -> dict[str, Any]:
    """The params of ``job`` (a ``shards.ShardJob``) that its shards' passages and vectors depend on."""
    embed = job.embed
    ours = {"chunk": job.chunk,
            "embed": None if embed is None else {k: v for k, v in embed.items() if k in VECTOR_PARAMS}}
    if job.enrich:  # only when there is some, so the job.json of an index made before stays equal
        ours["enrich"] = job.enrich
    return ours


def job_mismatch(staging: Path, key: str, ours: dict[str, Any], finished: set[str]) -> dict[str, tuple] | None:
    """(before, now) of each chunk/enrich/embed param in ``ours`` that differs from those of the finished shards of
    the source staged under ``key`` in ``staging`` (recorded in job.json); None when they agree or none is finished."""
    theirs = read_staging_json(staging / JOB_FILE)
    if theirs is None or theirs == ours or not any(s.startswith(key + "-") for s in finished):
        return None
    return {k: (theirs.get(k), ours[k]) for k in ours if theirs.get(k) != ours[k]}


def check_job(index_path: Path, staging: Path, ours: dict[str, Any], mismatch: dict[str, tuple] | None, *,
              nothing_to_do: bool, resume: str | None = None) -> None:
    """Chunking and encoder must stay those of the source's finished shards. With every shard finished nothing is
    made with the new ones (a default changed since the index was built: ``make demo`` again): said, and left.
    Otherwise ``ours`` is recorded in job.json. ``resume``: the command that resumes with the finished shards'
    params (``pending.unfinished``), named in the refusal."""
    from operators.atomic import write_bytes

    if mismatch is not None and nothing_to_do:
        log.warning("%s holds this source made with other chunk/enrich/embed params (before, now) = %s; "
                    "nothing is left to ingest, so it stays as it is (to remake it, ingest into a new index)",
                    index_path, mismatch, extra={"note": True})
        return
    if mismatch is not None:
        refusal = SettingsMismatchError(
            f"this source's finished shards were processed with other chunk/enrich/embed params "
            f"(before, now) = {mismatch}; resume with the same ones"
            f"{f' ({resume} does, as tessera index info says)' if resume else ''}, or ingest into a new index")
        refusal.resume = resume  # flows.api says it as the Python call (first_ingest.resume_in_python)
        raise refusal
    staging.mkdir(parents=True, exist_ok=True)
    write_bytes(staging / JOB_FILE, json.dumps(ours, sort_keys=True).encode())


def index_chunking(index_path: str | Path) -> dict[str, Any] | None:
    """The chunker params the index's documents were cut with: those of the source last ingested into it (its
    ``job.json``, rewritten by each run), or None where they were stored whole (``--no-chunk``, or an index that
    ``tessera index add`` made, which stages no source). ``tessera index add``/``update`` and ``Index.add``/``update``
    cut their documents so, whichever door they come through: a search then ranks passages of one size."""
    from operators.store.upgrade import staged_sources

    jobs = [(folder / JOB_FILE) for folder in staged_sources(index_path)]
    jobs = [job for job in jobs if job.is_file()]
    if not jobs:
        return None
    newest = max(jobs, key=lambda job: (job.stat().st_mtime_ns, job.parent.name))
    return (read_staging_json(newest) or {}).get("chunk")
