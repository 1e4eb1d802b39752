"""An upload's ingestion (``serve.indices.indices``), run by its task's Ray actor (``serve.tasks.taskrunner``).

The actor runs ``flows.ingestion.ingest`` in-process on the uploaded JSONL file, with the
index's ingest spec, and writes its progress into the task store as two steps, ``staging``
and ``ingest`` (documents read, then documents embedded and committed). The result says
how many documents and passages went in and how many failed (the index's failure ledger
keeps why). The uploaded file and its staging folder are removed when the task ends, whatever the outcome, and
when it is cancelled. A failed upload into an index that has no documents yet (its first) also removes the index's
folder and record, so the name and the disk are as before the upload; so does one interrupted (its worker died:
``serve.tasks.taskrunner.interrupted``) and one cancelled, once its worker has stopped (``remove_cancelled``): before
that it may still be writing there.

Every upload adds a shard. One that leaves its index with more shards than the service's ``compact_after_shards``
(recorded in its job) compacts the index before its task finishes (``compact_if_many``): while the task is unfinished
no other upload may write there, so no commit makes the compaction redo its merge. Its progress is a third step of the
task, ``compact``, counted as an admin's is (below). A compaction that fails leaves the index as the upload committed
it; the task says so in its log and still finishes, with its two steps.

An admin key's compaction (``POST /v1/admin/indices/{name}/compact``, ``serve.indices.index_admin``) is a task too
(``run_compact``, one step ``compact``): a big index's merge takes minutes, too long for a request to wait. Its step's
``rows_out`` counts the live chunks merged as each shard is (``CompactProgressWriter``), so ``/task/progress/{id}``
moves while it runs, up to ``rows_in``, the merged shards' chunks (deleted ones included). Its result
is what ``Index.compact`` reports (``CompactionSummary``): shards before and after, live chunks, tombstones dropped,
seconds.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from serve.indices.index_owner import born
from serve.tasks.task_rows import WriteThrottle, pending_progress
from serve.tasks.taskstore import TaskStore

log = logging.getLogger("tessera.serve")

#: The task's steps: the stages of ``flows.ingestion.progress.IngestProgress``.
STEPS = ["staging", "ingest"]
#: A compaction task's one step (``run_compact``).
COMPACT_STEPS = ["compact"]
#: How long a killed upload's worker gets to exit (its lock on the index freed) before its leftovers are removed.
WORKER_EXIT_S = 5.0


class IngestProgressWriter:
    """``on_progress`` of the ingestion: each stage's documents into the task's step progress (``rows_out`` of
    ``rows_in``), and the ``ingest`` step's passages embedded so far, ``passages_done`` of ``passages_total`` (those
    of the upload's one shard, known once it is chunked): a large file that is one document moves by them."""

    def __init__(self, store: TaskStore, task_id: str):
        self.store, self.task_id = store, task_id
        self.progress = pending_progress(STEPS)
        self.started: dict[str, float] = {}
        self.throttle = WriteThrottle()

    def __call__(self, event: Any) -> None:
        step = "staging" if event.stage == "staging" else "ingest"
        info, line = self.progress[step], None
        if step not in self.started:
            self.started[step] = time.perf_counter()
            info["status"] = "running"
            line = f"step '{step}' started"
            if step == "ingest" and self.progress["staging"]["status"] == "running":
                self.progress["staging"]["status"] = "done"
        info["rows_in"] = event.docs_total or 0
        info["rows_out"] = event.docs
        if event.chunks_total:
            info["passages_done"], info["passages_total"] = event.chunks, event.chunks_total
        info["seconds"] = round(time.perf_counter() - self.started[step], 3)
        if not self.throttle.due(forced=line is not None):
            return
        done = sum(1 for s in self.progress.values() if s["status"] == "done")
        self.store.update(self.task_id, log=line, current_step=step, steps_done=done, rows_done=event.docs,
                          step_progress=self.progress)


def run_ingest(store: TaskStore, task_id: str, job: dict[str, Any]) -> None:
    """Ingest ``job``'s uploaded file into its index and finish the task (the file is removed either way)."""
    from flows.ingestion import ingest
    from operators.errors import TesseraError

    writer = IngestProgressWriter(store, task_id)
    placement = job["spec"]["steps"]["embed"].get("placement") if isinstance(job["spec"], dict) else None
    if placement:
        store.update(task_id, log=f"the encoder runs on Serve deployment '{placement['app']}/"
                                  f"{placement['deployment']}'")
    try:
        report = ingest(job["source"], job["index_path"], spec=job["spec"], executor="local", progress=False,
                        on_progress=writer, replace=job.get("replace", False),
                        delete_doc_ids=documents_of_files(job["index_path"], job.get("replace_files", [])))
    except Exception as err:  # noqa: BLE001  (a task fails with the reason; the service goes on)
        discard_upload(job)
        owner = remove_unborn(store, task_id, job)  # while this task runs, no other upload may write there
        store.finish(task_id, "failed", error=str(err) if isinstance(err, TesseraError) else
                     f"{type(err).__name__}: {err}")
        if owner is not None:
            forget_unborn(store, job, owner)
    else:
        ingested = {s: {**info, "status": "done"} for s, info in writer.progress.items()}
        store.update(task_id, step_progress=ingested, steps_done=len(STEPS), rows_done=report.docs)
        compacted = compact_if_many(store, task_id, job, ingested)
        store.finish(task_id, "finished", result=ingest_result(job["index"], report, compacted))
    finally:
        discard_upload(job)


def compact_if_many(store: TaskStore, task_id: str, job: dict[str, Any],
                    ingested: dict[str, Any]) -> dict[str, Any] | None:
    """Compact the upload's index when it now holds more shards than the job's ``compact_after_shards`` (0 or
    absent, as in a job queued by an older service: never); what ``compact_index`` did, None when it did nothing.

    Its progress goes into the task as a third step, ``compact``, beside the upload's ``ingested`` ones (done): the
    task's steps are ``staging``, ``ingest``, ``compact`` from then on, so ``/task/progress/{id}`` says 2/3, then
    3/3. A compaction that fails takes its step away again (a finished task marks every step done)."""
    limit = job.get("compact_after_shards") or 0
    if not limit or not born(Path(job["index_path"])):
        return None
    from operators.store import Index

    shards = Index.open(job["index_path"], verify=False).counts()["shards"]
    if shards <= limit:
        return None
    step = COMPACT_STEPS[0]
    store.update(task_id, log=f"index '{job['index']}' has {shards} shards, over compact_after_shards={limit}: "
                              "compacting it", steps=[*ingested, step], current_step=step,
                 step_progress={**ingested, step: {**pending_progress(COMPACT_STEPS)[step], "status": "running"}})
    try:
        done = compact_index(job["index_path"], CompactProgressWriter(store, task_id, ingested))
    except Exception as err:  # noqa: BLE001  (the documents are in: the upload stands, uncompacted)
        store.update(task_id, log=f"compaction failed, the index keeps its {shards} shards: {err}",
                     steps=list(ingested), current_step=list(ingested)[-1], step_progress=ingested)
        return None
    store.update(task_id, log=f"compacted index '{job['index']}': {done['shards_before']} shards into "
                              f"{done['shards_after']} in {done['seconds']} s",
                 steps_done=len(ingested) + 1, step_progress={**ingested, step: compacted_step(done)})
    return done


def compact_index(path: str | Path, on_progress: Any = None) -> dict[str, Any]:
    """``Index.compact`` of the index at ``path`` (its live chunks into few shards, deleted ones dropped), as JSON:
    shards before and after, live chunks, tombstones dropped, seconds (``CompactionSummary.as_dict``)."""
    from operators.store import Index

    return Index.open(path).compact(on_progress=on_progress).as_dict()


def compacted_step(done: dict[str, Any]) -> dict[str, Any]:
    """The ``compact`` step's progress once ``done`` (``compact_index``'s): the chunks merged in, the live ones out."""
    return {"status": "done", "rows_in": done["chunks_before"], "rows_out": done["chunks"], "seconds": done["seconds"]}


class CompactProgressWriter:
    """``on_progress`` of a compaction (``operators.store.compaction.CompactProgress``): the live chunks merged so far
    into its step, ``compact``, ``rows_out`` of ``rows_in`` (the merged shards' chunks, as its result counts them), at
    most every ``PROGRESS_EVERY_S``, the first and the last shard always. An upload's compaction passes the upload's
    steps (``before``), kept beside it, and keeps the task's ``rows_done`` (its documents); an admin's counts chunks
    there."""

    def __init__(self, store: TaskStore, task_id: str, before: dict[str, Any] | None = None):
        self.store, self.task_id, self.before = store, task_id, before or {}
        self.started = time.perf_counter()
        self.throttle = WriteThrottle()

    def __call__(self, event: Any) -> None:
        last = event.shards == event.shards_total
        if not self.throttle.due(forced=last or event.shards <= 1):
            return
        step = COMPACT_STEPS[0]
        again = f" (attempt {event.attempt}: the index changed meanwhile)" if event.attempt > 1 else ""
        rows_done = {} if self.before else {"rows_done": event.chunks}
        self.store.update(self.task_id, current_step=step, **rows_done, step_progress={**self.before, step: {
            "status": "running", "rows_in": event.chunks_total, "rows_out": event.chunks,
            "seconds": round(self.throttle.written - self.started, 3)}},
            log=f"merged {event.shards} of {event.shards_total} shards{again}" if last else None)


def run_compact(store: TaskStore, task_id: str, job: dict[str, Any]) -> None:
    """Compact ``job``'s index (an admin's ``POST /v1/admin/indices/{name}/compact``, ``serve.indices.index_admin``) and
    finish the task with what it did. A commit landing meanwhile makes the merge redo itself (``Index.compact``); one
    that keeps landing fails the task, the index as it was."""
    from operators.errors import TesseraError
    from operators.store.errors import CommitConflictError

    name = job["index"]
    step = COMPACT_STEPS[0]
    if not store.update(task_id, log=f"compacting index '{name}'", current_step=step,
                        step_progress={step: {**pending_progress(COMPACT_STEPS)[step], "status": "running"}}):
        return  # cancelled meanwhile
    try:
        done = compact_index(job["index_path"], CompactProgressWriter(store, task_id))
    except CommitConflictError as err:
        store.finish(task_id, "failed", error=f"index '{name}' changed while it was compacted: {err.message}")
    except Exception as err:  # noqa: BLE001  (a task fails with the reason; the service goes on)
        store.finish(task_id, "failed", error=str(err) if isinstance(err, TesseraError) else
                     f"{type(err).__name__}: {err}")
    else:
        store.update(task_id, steps_done=1, rows_done=done["chunks"], step_progress={step: compacted_step(done)})
        store.finish(task_id, "finished", result=compact_result(job, done),
                     log=f"compacted index '{name}': {done['shards_before']} shards into {done['shards_after']} in "
                         f"{done['seconds']} s")


def compact_result(job: dict[str, Any], done: dict[str, Any]) -> dict[str, Any]:
    """mosaicRAG's ``result`` shape for a compaction: no rows; what it did in ``result_description`` and, with the
    index and its owner, in ``aggregated_data`` (what the compaction route answered when it ran in the request)."""
    return {
        "data": [],
        "result_description": {**done, "rows": 0, "queries": 0, "time": done["seconds"],
                               "text": f"index '{job['index']}' compacted: {done['shards_before']} shard(s) into "
                                       f"{done['shards_after']}, {done['chunks']} live passage(s), "
                                       f"{done['tombstones_dropped']} deleted one(s) dropped"},
        "aggregated_data": {"index": job["index"], "owner": job["owner"], **done},
        "metadata": {},
    }


def remove_unborn(store: TaskStore, task_id: str, job: dict[str, Any]) -> str | None:
    """After a failed upload into an index with no committed documents (its first upload, or every one before it
    failed too): remove the index folder (its owner file, staging, failure ledger) and the upload's empty folder, so
    the name and the disk are free again; its owner, whose row ``forget_unborn`` removes once the task is final.
    None, touching nothing, when the index holds documents (its manifest records a commit, ``born``: the empty one
    ``Index.create`` wrote as the upload started does not) or another upload is its latest."""
    row, path = store.index(job["index"]), Path(job["index_path"])
    if row is None or row["ingest_task"] != task_id or born(path) or _ingest_runs(path):
        return None
    _remove(move_folder_aside(path), job)
    return row["owner"]


def remove_cancelled(store: TaskStore, task: dict[str, Any]) -> bool:
    """After a cancelled upload whose worker has stopped (it writes nothing more): when the index has no committed
    documents and this upload is still its latest, remove its folder, record and the upload's empty folder, as
    ``remove_unborn`` and ``forget_unborn`` do for a failed one (an empty manifest, ``Index.create``'s, is no
    documents: ``born``). The task is final already, so a new upload into the
    index may come at any time: the record is checked and removed, and the folder moved aside, in one transaction
    that such an upload waits for. Whether the index went; an index that holds documents always stays."""
    job = task["spec"]["ingest"]
    path, moved = Path(job["index_path"]), []
    if born(path) or _ingest_runs(path):
        return False  # checked again in the transaction; this spares it (``recover`` asks about every such index)

    def move_aside() -> bool:
        if born(path):
            return False
        moved.append(move_folder_aside(path))
        return True

    gone = store.forget_index(job["index"], task["owner"], latest=task["id"], before=move_aside) == "ok"
    if gone:
        _remove(moved[0], job)
    return gone


def _ingest_runs(path: Path) -> bool:
    """Whether an ingest still holds the index's lock (a killed worker that outlived ``discard_stopped_upload``'s
    wait): it may yet commit, into a folder it would make again without its owner file, so the index stays; the
    watcher or a replica's start (``recover``) asks again once it is gone."""
    from flows.ingestion.running import idle

    with idle(path) as free:
        return not free


def move_folder_aside(path: Path) -> Path | None:
    """Rename an index folder to a hidden name at once (a search or a listing sees the whole folder or none of
    it); where it went, None when there was none. Deleting an index (``indices``) moves its folders so too."""
    import uuid

    if not path.exists():
        return None
    doomed = path.with_name(f".deleted-{path.name}-{uuid.uuid4().hex[:8]}")
    path.rename(doomed)
    return doomed


def _remove(doomed: Path | None, job: dict[str, Any]) -> None:
    """Delete a folder ``move_folder_aside`` moved, and the upload's folder when it is empty (another upload's file
    keeps it)."""
    import shutil

    if doomed is not None:
        shutil.rmtree(doomed, ignore_errors=True)
    try:
        Path(job["source"]).parent.rmdir()
    except OSError:
        pass


def forget_unborn(store: TaskStore, job: dict[str, Any], owner: str) -> None:
    """Remove the row of an index whose first upload failed (``remove_unborn``), unless its owner has sent another
    upload meanwhile (the store refuses it in the same transaction: that upload keeps the name)."""
    why = store.forget_index(job["index"], owner)
    if why != "ok":
        log.info("index %s: its failed upload's record is kept (%s)", job["index"], why)


def in_this_home(task: dict[str, Any]) -> dict[str, Any]:
    """``task`` with its upload's paths (index, uploaded file, staging) in this service's ``$TESSERA_HOME``. A job
    records them whole (``<home>/indices/<name>``, ``<home>/uploads/<name>/...``), so in a home copied or moved
    elsewhere (``cp -a``, a backup restored) a service cleaning up after an interrupted upload removed the old home's
    files (a live service's upload file there too) and left the copy's. A task of no upload, or whose index is not in
    an ``indices`` folder of a home, is returned as it is."""
    from operators.home import tessera_home

    job = task.get("spec", {}).get("ingest") if isinstance(task.get("spec"), dict) else None
    index = Path(job["index_path"]) if isinstance(job, dict) and job.get("index_path") else None
    if index is None or index.parent.name != "indices" or index.name != job.get("index"):
        return task
    old, home = index.parent.parent, tessera_home().resolve()
    if old == home:
        return task
    moved = dict(job)
    for key in ("index_path", "source", "staging"):
        if isinstance(job.get(key), str) and Path(job[key]).is_relative_to(old):
            moved[key] = str(home / Path(job[key]).relative_to(old))
    return {**task, "spec": {**task["spec"], "ingest": moved}}


def discard_upload(job: dict[str, Any], staging: bool = True) -> None:
    """Remove the upload's file and (unless ``staging`` is False) its staging folder in the index (what a task that
    stops half-way leaves: the service never resumes an upload, a client sends it again)."""
    import shutil

    Path(job["source"]).unlink(missing_ok=True)
    if staging and job.get("staging"):  # recorded when the upload was accepted (an older service's job has none)
        shutil.rmtree(job["staging"], ignore_errors=True)


def discard_stopped_upload(job: dict[str, Any], wait_s: float = WORKER_EXIT_S) -> None:
    """``discard_upload`` once the upload's worker is gone (killed, or it died), and the index's ``running.lock`` its
    run left (a killed process never ends its ``Running``) with an empty ``_ingest/``: ``flows.ingestion.running.idle``,
    which first waits up to ``wait_s`` for the worker's lock to be free. Ray stops listing a killed actor before its
    process has exited, and until then it may still write staged shards. While the staging is removed no ingest
    starts there; one that still holds the lock after the wait (another upload's, maybe of the same documents) keeps
    its staging and the lock, which it removes when it ends."""
    from flows.ingestion.running import idle

    try:
        with idle(job["index_path"], wait_s) as free:
            discard_upload(job, staging=free)
    except OSError:  # the index folder is unusable (not ours to fix here): the file and staging go as before
        log.exception("index %s: its ingest lock could not be swept", job.get("index"))
        discard_upload(job)


def documents_of_files(index_path: str, files: list[str]) -> set[str]:
    """The documents in the index that came from uploaded files named ``files`` (their ``path``, and an id such a
    file gives): a re-sent file replaces them all, so a PDF sent again with fewer pages keeps none of its old last
    pages, while a JSON document whose metadata names the file as its ``path`` stays."""
    from operators.store import Index
    from serve.indices.documents import made_from_file

    if not files or not born(Path(index_path)):
        return set()
    _, table = Index.open(index_path, verify=False).columns(["doc_id", "path"])
    wanted = set(files)
    return {str(d) for d, p in zip(table.column("doc_id").to_pylist(), table.column("path").to_pylist())
            if p in wanted and made_from_file(str(d), p)}


def ingest_result(name: str, report: Any, compacted: dict[str, Any] | None = None) -> dict[str, Any]:
    """mosaicRAG's ``result`` shape for an ingestion: no rows, the counts in ``result_description`` (with
    ``compaction`` when the upload compacted the index)."""
    failed = f"; {report.failures} failed (the index's failures.jsonl says why)" if report.failures else ""
    counts = {"documents": report.docs, "chunks": report.chunks, "failures": report.failures}
    compaction = {"compaction": compacted} if compacted else {}
    then = f"; the index was compacted into {compacted['shards_after']} shard(s)" if compacted else ""
    kept = f" ({report.chunks_reused} kept their vectors: their text did not change)" if report.chunks_reused else ""
    return {
        "data": [],
        "result_description": {**counts, "chunks_reused": report.chunks_reused, "rows": 0, "queries": 0,
                               "time": round(report.seconds, 3), **compaction,
                               "text": f"{report.docs} document(s) into index '{name}' as {report.chunks} "
                                       f"passage(s){kept}{failed}{then}"},
        "aggregated_data": {"index": name, **counts},
        "metadata": {},
    }
