"""``--retry-failed``: the ledger's open failures, and only those, processed into one new shard per source.

A read failure is read again from its file and line (the ledger records the file's absolute path; a relative
one, from a ledger written before, is found among the files of its source's staging state, then in the working
directory; a file that is not there is an error naming it, before anything is written). A document whose id
is live in the index (a repeated id, see ``flows.ingestion.duplicates``) stays a failure, unless the retry
runs with ``replace``; so does a second copy of an id within the retry.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa

from flows.ingestion.embedder import Embedder
from flows.ingestion.errors import IngestError, read_staging_json
from flows.ingestion.ledger import Failure, absolute
from flows.ingestion.records import jsonl_plan, read_line_records, read_whole
from flows.ingestion.shards import ShardJob, prepare, write
from flows.ingestion.staging import STAGING_DIR
from flows.ingestion.unrecorded import source_key_of
from flows.ingestion.where_now import in_this_home, now_path
from operators.base import Source
from operators.tables import concat

log = logging.getLogger("tessera.ingest")
#: How a retry replaces a live id, in the failure ledger (``failures.jsonl``), which a Python caller and a
#: ``tessera ingest`` user both read: the parameter and the option, once each.
REPLACE = "replace=True (tessera ingest --replace)"

#: The ingestion run (``job._Run``): its index, ledger, job, report and commit.
Run = Any


def retry(run: Run) -> Any:
    """Process the ledger's open failures, and only those: one new shard per source they came from."""
    started = time.perf_counter()
    run.closed = set()  # with sync: the failures of files no longer there, closed
    failures = run.ledger.open_failures(run.finished())
    groups: dict[str, list[Failure]] = {}
    for failure in failures:
        groups.setdefault(source_key_of(failure.shard), []).append(failure)
    shards = {key: retry_shard_id(key) for key in groups}  # one shard per source, named before any is written
    r = run.report
    r.docs_total, r.shards_total, r.shards_skipped = len(failures), len(shards), 0
    with run._track("retry", len(failures), {shards[key]: len(group) for key, group in groups.items()}):
        for key, group in groups.items():
            _retry_group(run, key, group, shards[key])
    report = run._finish(started)
    still = {f.id for f in run.ledger.open_failures(run.finished())}
    report.closed = len(run.closed)
    # a file read again may fail on lines of its own; a closed failure is not in the index
    report.resolved = sum(f.id not in still and f.id not in run.closed for f in failures)
    return report


def retry_shard_id(key: str) -> str:
    """A new shard for the retried failures of the source ``key`` (``source_key_of`` reads the key back)."""
    return f"retry-{key or 'none'}-{time.strftime('%Y%m%d%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:6]}"  # UTC


def _retry_group(run: Run, key: str, failures: list[Failure], shard: str) -> None:
    """Failures of one source, into ``shard``, with that source's read step, chunking and encoder params."""
    staging = run.path / STAGING_DIR / key
    job = run.job
    ids = {f.id for f in failures}
    recorded = read_staging_json(staging / "job.json")
    if recorded is not None:
        embed = None if run.job.embed is None else {**run.job.embed, **(recorded["embed"] or {})}
        job = ShardJob(**{**run.job.__dict__, "chunk": recorded["chunk"], "enrich": recorded.get("enrich", []),
                          "embed": embed})
    found: list[tuple[Failure, pa.Table]] = []
    again: list[Failure] = []
    state = read_staging_json(staging / "state.json")
    read = _source_of(run, state) if any(f.stage == "read" and f.path for f in failures) else None
    paths = {}
    for failure in [f for f in failures if f.stage == "read" and f.path]:
        try:
            paths[failure.id] = locate(now_path(failure.path, state, run.path), read)
        except IngestError:
            if not run.sync:
                raise
            run.closed.add(failure.id)  # its source no longer has it: closed, as a sync closes a removed file's
    log_closed(failures, run.closed)
    failures = [f for f in failures if f.id not in run.closed]
    lines = _read_lines(read, [(paths[f.id], f.line) for f in failures if f.id in paths and f.line])
    for failure in failures:
        if failure.id in paths:
            path = paths[failure.id]
            if failure.line:
                got = lines[path, failure.line]
                if isinstance(got, Failure):
                    again.append(got)
                else:
                    found.append((failure, got))
                continue
            table, failed = _read_file(read, path, failure)
            again += failed
            if table is not None:
                found.append((failure, table))
        else:
            found.append((failure, pa.Table.from_pylist([failure.record])))
    tables = _unique(run, found, again)
    docs = concat(tables) if tables else pa.table({"docno": pa.array([], pa.string())})
    run.ledger.record_retry(shard, [f.id for f in failures] + sorted(run.closed & ids))
    started = time.perf_counter()
    rows = prepare(job, shard, docs)
    embedded = 0
    if job.embed is not None and rows.num_rows:
        rows, embedded, _ = Embedder(job, run.tracker.embedded)(rows)
    run._commit(write(job, run.index, shard, rows, lambda: (docs, again), chunks_embedded=embedded,
                      started=started))


def log_closed(failures: list[Failure], closed: set[str]) -> None:
    """Say which files' failures a retry with sync closed, the files being no longer there."""
    files = sorted({f.path for f in failures if f.id in closed and f.path})
    if files:
        log.warning("closed: %d failure(s) of %s, no longer there (retried with sync=True: its source no longer has "
                    "it)", len(closed & {f.id for f in failures}), ", ".join(files[:5]) + (
                        f" and {len(files) - 5} more" if len(files) > 5 else ""))


def _read_lines(op: Source | None, wanted: list[tuple[str, int]]) -> dict[tuple[str, int], pa.Table | Failure]:
    """The failed lines (file, line) read again, each file once however many of its lines failed."""
    by_file: dict[str, list[int]] = {}
    for path, line in wanted:
        by_file.setdefault(path, []).append(line)
    return {(path, line): got for path, lines in by_file.items()
            for line, got in read_line_records(op, path, lines).items()}


def _unique(run: Run, found: list[tuple[Failure, pa.Table]], again: list[Failure]) -> list[pa.Table]:
    """The documents to retry; one whose id is live in the index (unless ``replace``) or met before in this
    retry fails again, under its failure's id."""
    live: set[str] = set()
    if found and not run.replace:
        live = {str(d) for d in run.index.columns(["doc_id"])[1].column("doc_id").to_pylist()}
    seen: set[str] = set()
    tables = []
    for failure, table in found:
        for i in range(table.num_rows):  # a PDF file's pages are documents of their own
            doc_id = str(table.column("docno")[i].as_py()) if "docno" in table.column_names else None
            if doc_id in live or doc_id in seen:
                where = "in the index already" if doc_id in live else "also retried from another failure"
                again.append(dataclasses.replace(failure, shard=None, error=(  # read later, by either caller
                    f"duplicate id {doc_id}: {where}; give the document another id, or retry with {REPLACE}")))
                break
            seen.add(doc_id)
        else:
            tables.append(table)
    return tables


def _read_file(op: Source, path: str, failure: Failure) -> tuple[pa.Table | None, list[Failure]]:
    """A file that could not be read at all (a PDF, a gzip, a CSV without its header), read again whole: its
    documents, and what still fails in it (the file again, under its failure's id, or its bad lines and rows,
    each a failure of its own)."""
    tables, failed = [], []
    for item in read_whole(op, path):
        if isinstance(item, Failure):
            failed.append(dataclasses.replace(failure, shard=None, error=item.error) if item.id == failure.id
                          else item)
        elif item.num_rows:
            tables.append(item)
    return (concat(tables) if tables else None), failed


def locate(path: str, op: Source) -> str:
    """The file of a read failure: its recorded path when absolute; a relative one (an older ledger) among the
    files of the source ``op`` (read with absolute paths from its staging state), else from here."""
    recorded = Path(path).expanduser()
    found = recorded if recorded.is_absolute() else None
    if found is None:
        tail = tuple(p for p in recorded.parts if p not in (".", ".."))
        found = next((f for f in _files(op) if f.parts[-len(tail):] == tail), None) if tail else None
    found = found or Path(absolute(path))
    if not found.is_file():
        raise IngestError(f"cannot retry the failures read from {path}: {found} is not there; put the file back "
                          "(fixed) to retry them, or, where it moved, ingest it from there (that closes "
                          "them, or makes them failures at that path); to close them, the file gone for good, retry "
                          "with sync=True", field="source")
    return str(found)


def _files(op: Source) -> list[Path]:
    plan = None
    try:
        plan = jsonl_plan(op)
    except Exception:  # noqa: BLE001 - the files are gone: fall back on the source's path param
        pass
    if plan is not None:
        return [Path(p) for p in plan[0]]
    params = op.params.model_dump()
    return [Path(params[n]) for n in ("path",) if isinstance(params.get(n), str)]


def _source_of(run: Run, data: dict[str, Any] | None) -> Source:
    """The read step that staged a source (from its staging state ``data``), where it is now (``where_now``), to map
    a fixed line again."""
    from operators.registry import get_operator

    if data is None:
        return run.plan.read
    params = dict(data["params"])
    for name in ("path", "folder"):
        if isinstance(params.get(name), str):
            params[name] = in_this_home(params[name], run.path)
    return get_operator(data["source"], step="read")(params, step_id="read")
