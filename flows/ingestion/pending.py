"""An index's unfinished ingestions: sources staged under ``<index>/_ingest/<key>/`` whose shards the manifest
does not all list yet (an ingest that was interrupted or crashed, or one that runs now, or one whose commit the
index refused: ``flows.ingestion.refused``, reported with its reason instead of as interrupted, until its
documents have all come in by other commits).

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

from flows.ingestion.staging import STATE_FILE
from operators.store.upgrade import staged_sources


def _staged(folder: Path) -> list[str]:
    """The shard ids staged in ``folder`` (a shard's file is deleted once the manifest lists it)."""
    try:
        return sorted(name[: -len(".parquet")] for name in os.listdir(folder) if name.endswith(".parquet"))
    except FileNotFoundError:
        return []


def has_staged(index_path: str | Path) -> bool:
    """Whether some source's shards wait in ``_ingest/`` (cheap: no manifest is read)."""
    return any(_staged(folder) for folder in staged_sources(index_path))


def unfinished(index_path: str | Path) -> list[dict[str, Any]]:
    """One record per source whose planned shards are not all committed: ``source``, ``shards_planned`` (None
    when staging itself was cut short), ``shards_done``, ``shards_pending``, ``docs_pending``, ``resume`` and
    ``refused`` (``shard``, ``field``, ``reason`` and ``advice`` when the index refused the last run's commit:
    ``flows.ingestion.refused``; else None), ``syncing`` (a sync of the source, ``flows.ingestion.resync``, is
    unfinished: the documents it no longer has are still in the index) and ``running`` (an ingest holds the index's
    lock now: ``running.held``; None where that cannot be asked)."""
    from flows.ingestion import refused
    from flows.ingestion.ledger import finished_shards
    from flows.ingestion.running import held
    from flows.ingestion.where_now import located, source_now
    from operators.store import Index

    folders = staged_sources(index_path)
    if not folders:
        return []
    index = Index.open(index_path)
    finished = finished_shards(index)
    running = held(index.path)
    found = []
    for folder in folders:
        state = read_json_or_none(folder / STATE_FILE)
        planned = {s["id"]: s.get("docs") for s in state.get("shards", [])} if state else None
        pending = [s for s in (planned if planned is not None else _staged(folder)) if s not in finished]
        syncing = bool(state and state.get("syncing"))  # its last step, the deletions, may be all that is left
        if not pending and not syncing:
            continue
        refusal = _refusal(folder, syncing)
        if refusal is not None and refused.superseded(index, folder, pending):
            continue
        source = source_now(state, index_path)  # in this home, where it moved with it: resumed from there
        state = state and {**state, "params": {**(params := state.get("params") or {}), **located(params, source)}}
        found.append({
            "source_key": folder.name,
            "source": source,
            "shards_planned": None if planned is None else len(planned),
            "shards_done": None if planned is None else len(planned) - len(pending),
            "shards_pending": len(pending),
            "docs_pending": None if planned is None else sum(planned[s] or 0 for s in pending),
            "resume": resume_command_of(index.path, index.settings, folder.name, source, state,
                                        read_json_or_none(folder / "job.json")),
            "refused": refusal,
            "syncing": syncing,
            "running": running,
        })
    return found


def ingested(index_path: str | Path) -> list[dict[str, Any]]:
    """One record per source staged into the index (``tessera index info``): ``source_key``, ``op``, ``source`` (its
    path, folder or glob, in this home where it moved with it: ``where_now``), ``recorded`` (the path its staging
    recorded, where that is another: the home it was ingested in), ``there`` (whether ``source`` is there now; None
    for a source of no path), ``shards`` and ``docs`` as its staging planned them, and ``paths_from``: for a source
    of files (PDF, text, Markdown, HTML) the folder its documents' ``path`` is relative to, the one place that names
    it (a hit's ``path`` is ``science/curie.pdf``); else None."""
    from flows.ingestion.where_now import is_there, location, source_now
    from operators.sources.paths import path_root

    found = []
    for folder in staged_sources(index_path):
        state = read_json_or_none(folder / STATE_FILE)
        if not state:
            continue
        recorded, source = location(state.get("params")), source_now(state, index_path)
        shards = state.get("shards") or []
        files = state.get("source") in ("sources.files", "sources.pdf") and isinstance(source, str)
        found.append({"source_key": folder.name, "op": state.get("source"), "source": source,
                      "recorded": recorded if recorded != source else None,
                      "there": None if source is None else is_there(source), "shards": len(shards),
                      "docs": sum(s.get("docs") or 0 for s in shards),
                      "paths_from": str(path_root(source)) if files else None})
    return found


def describe_source(record: dict[str, Any]) -> str:
    """One line for a person: a source, its documents, where their ``path`` starts, and where it was recorded when
    that is not where it is now (a home moved since), or that it is not there."""
    where = f"; a document's path is from {record['paths_from']}" if record["paths_from"] else ""
    if record.get("recorded"):
        where += f"; ingested from {record['recorded']}, in the home it moved from"
    elif record.get("there") is False:
        where += "; not there now (moved or removed since it was ingested: ingest it from where it is to follow it)"
    return (f"source {record['source'] or record['source_key']} ({record['op']}): {record['docs']} document(s) in "
            f"{record['shards']} shard(s){where}")


def resume_command(index_path: str | Path, key: str) -> str | None:
    """The command that resumes the source staged under ``key`` with the params of its finished shards, or None
    when it has nothing left to do."""
    return next((record["resume"] for record in unfinished(index_path) if record["source_key"] == key), None)


def _refusal(folder: Path, syncing: bool) -> dict[str, Any] | None:
    """The refusal of the source's last run (``flows.ingestion.refused``) with what lifts it, or None."""
    from flows.ingestion import refused

    found = refused.read(folder)
    return None if found is None else {**found, "advice": refused.advice(found, syncing)}


def read_json_or_none(path: Path) -> dict[str, Any] | None:
    """A staging file's JSON (``state.json``, ``job.json``), or None where it is missing or not JSON: for what only
    reports an ingestion (this module, ``first_ingest``'s resume command), where a run refuses a damaged one
    (``errors.read_staging_json``)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def resume_command_of(path: str | Path, settings, key: str, source: str | None, state: dict | None,
                      job: dict | None, *, index_settings: dict[str, Any] | None = None) -> str:
    """The ``tessera ingest`` that resumes the source staged under ``key`` in the index at ``path``, with the index's
    ``settings`` (an index's own, or those an interrupted first ingestion was making: ``first_ingest``):
    ``--source PATH`` when that reads the same source with the chunking and embedding of the default spec, which
    the run recorded (``job.json``); else ``--spec`` with a spec of the run's own read step (a reader ``--source``
    would not pick, say ``sources.jsonl`` for ``notes.json``), enrich, chunk and embed steps, inline, and the
    ``index_settings`` that no option says (a first ingestion's encoder, say), which only a spec carries."""
    flags = ["--index", str(path)]
    if state and state.get("shard_size"):
        flags += ["--shard-size", str(state["shard_size"])]
    if settings.dense and settings.dense_type != "flat":  # what a first ingestion creates the index with
        flags += ["--dense-type", settings.dense_type]
    flags += [flag for flag, off in (("--no-dense", not settings.dense), ("--no-bm25", not settings.bm25),
                                     ("--no-chunk", job is not None and job.get("chunk") is None),
                                     ("--replace", bool(state and state.get("duplicates")))) if off]  # staged so
    if state is None or (not index_settings and source is not None and _source_resumes(settings, key, source, job,
                                                                                       state)):
        return shlex.join(["tessera", "ingest", "--source", source or "SOURCE", *flags])
    spec = {**_resume_spec(state, job), **({"index_settings": index_settings} if index_settings else {})}
    return shlex.join(["tessera", "ingest", "--spec", json.dumps(spec), *flags])


def _source_resumes(settings, key: str, source: str, job: dict | None, state: dict) -> bool:
    """Whether ``tessera ingest --source SOURCE`` (the default spec) reads the staged source (its key, or as its
    ``state`` reads it where it moved with the home, which the run recognises) and chunks, enriches and embeds as the
    run did (what ``job.json`` holds, compared as the run compares it)."""
    from flows.ingestion.plan import DEFAULT_SPEC, build_plan, embed_params
    from flows.ingestion.staged_files import params_key, source_key
    from operators.errors import TesseraError

    no_chunk = job is not None and job.get("chunk") is None
    try:
        plan = build_plan(DEFAULT_SPEC, source, False if no_chunk else None, quiet=True)
        if source_key(plan.read) not in (key, params_key(state.get("source") or "", state.get("params") or {})):
            return False
        embed = embed_params(plan, settings)
    except (TesseraError, OSError):
        return False
    if job is None:  # no shard was processed: any chunking and embedding will do
        return True
    from flows.ingestion.job_params import VECTOR_PARAMS

    ours = {"chunk": plan.chunk,
            "embed": None if embed is None else {k: v for k, v in embed.items() if k in VECTOR_PARAMS}}
    return {**ours, "enrich": plan.enrich or None} == {**{k: job.get(k) for k in ours}, "enrich": job.get("enrich")}


def _resume_spec(state: dict, job: dict | None) -> dict[str, Any]:
    """The default ingest spec with the run's read step (its operator and params, paths absolute) and, when the
    run recorded them, its enrich, chunk and embed params."""
    from flows.ingestion.plan import DEFAULT_SPEC
    from flows.spec import FlowSpec

    default = FlowSpec.load(DEFAULT_SPEC).to_dict()["steps"]
    steps: dict[str, Any] = {"read": {"op": state["source"], "params": _set_params(state)}}
    for step in (job or {}).get("enrich") or []:
        steps[step["step"]] = {"op": step["op"], "params": step.get("params") or {}}
    if job is None or job.get("chunk") is not None:
        steps["chunk"] = default["chunk"] if job is None else {**default["chunk"], "params": job["chunk"]}
    embed = (job or {}).get("embed")
    if embed is not None:  # the vectors' params are the run's alone: a default's title_column the run had not is not
        from flows.ingestion.job_params import VECTOR_PARAMS

        others = {k: v for k, v in default["embed"]["params"].items() if k not in VECTOR_PARAMS}
        steps["embed"] = {**default["embed"], "params": {**others, **embed}}
    else:
        steps["embed"] = default["embed"]
    return {"name": "resume", "steps": steps}


def _set_params(state: dict) -> dict[str, Any]:
    """The read step's recorded params less those at their defaults (a shorter command)."""
    from operators.registry import get_operator

    params = state.get("params") or {}
    try:
        fields = get_operator(state["source"]).Params.model_fields
    except Exception:  # noqa: BLE001 - an operator no longer installed: every param, as recorded
        return params
    return {k: v for k, v in params.items() if k not in fields or fields[k].is_required() or fields[k].default != v}


def describe(record: dict[str, Any]) -> str:
    """One line for a person: what is unfinished and how to resume it."""
    if record["shards_planned"] is None:
        done = f"staging was cut short, {record['shards_pending']} shard(s) staged and not committed"
    else:
        done = (f"{record['shards_done']} of {record['shards_planned']} shard(s) committed, {record['docs_pending']} "
                f"document(s) {'not yet updated' if record.get('syncing') else 'not yet in the index'}")
    if record.get("syncing"):
        done += "; the documents it no longer has are deleted at its end"
    source = record["source"] or record["source_key"]
    what = "sync" if record.get("syncing") else "ingestion"
    refusal = record.get("refused")
    if refusal:
        return (f"unfinished {what} of {source} ({done}; refused: {refusal['reason']}; {refusal['advice']}); "
                f"then: {record['resume']}")
    running = record.get("running")
    if running is None:  # (a record of before the question, or a lock file it may not open)
        return f"unfinished {what} of {source} ({done}; interrupted, or still running); resume: {record['resume']}"
    if running:
        return (f"unfinished {what} of {source} ({done}; still running: an ingest holds the index's lock now); if it "
                f"stops, resume: {record['resume']}")
    return f"unfinished {what} of {source} ({done}; interrupted: no ingest runs on it); resume: {record['resume']}"
