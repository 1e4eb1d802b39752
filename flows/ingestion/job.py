"""One ingestion run on the driver: stage the source, process the unfinished shards, commit each one.

See the package docstring (``flows.ingestion``) for how staging, shards and commits make it resumable.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Iterable, Literal

from flows.ingestion import first_ingest, refused, resync, reuse
from flows.ingestion.checks import DEFAULT_SHARD_SIZE, CheckedIngest, check_ingest, doc_ids_to_delete, warn_damaged
from flows.ingestion.embedder import Embedder, EmbedStopped
from flows.ingestion.faults import Faults
from flows.ingestion.job_params import check_job, job_mismatch, job_params
from flows.ingestion.pending import resume_command
from flows.ingestion.ledger import Ledger, finished_shards
from flows.ingestion.moved import earlier_key, last_path
from flows.ingestion.where_now import failure_here
from flows.ingestion.plan import IngestPlan
from flows.ingestion.progress import IngestProgressCallback, ProgressTracker, Stage
from flows.ingestion.report import IngestReport
from flows.ingestion.retry import retry
from flows.ingestion.running import Running
from flows.ingestion.shard_commits import ShardCommits, in_order
from flows.ingestion.shards import (EMBED_BATCH_ROWS, ShardJob, ShardResult, make_chunker,
                                   make_enrichers, prepare, staged_unless_done, write)
from flows.ingestion.staging import STAGING_DIR, STATE_FILE, Stager
from flows.ingestion.unrecorded import source_shards
from operators.store.disk import refused_by_disk

log = logging.getLogger("tessera.ingest")
#: How the note of a source whose documents the index staged before, ingested again with replace=True, begins (the
#: Python API's documents in memory, given again to Index.add or update, leave it out: it names a temporary file).
RESENT = "the source starts with the documents of a source the index holds"
__all__ = ["DEFAULT_SHARD_SIZE", "CheckedIngest", "IngestReport", "check_ingest", "ingest"]

class _Run(ShardCommits):
    """One ingestion run on the driver: staging, processing, commits, progress, the report."""

    def __init__(self, index_path: Path, plan: IngestPlan, settings, embed: dict[str, Any] | None, *,
                 shard_size: int | None, executor: str, progress: bool, on_progress: IngestProgressCallback | None,
                 replace: bool = False, delete_doc_ids: Iterable[str] = (), sync: bool = False):
        from operators.store import Index

        self.path = index_path
        self.replace, self.sync = replace, sync
        self.delete_doc_ids = set(delete_doc_ids)  # deleted by the first commit, with the documents it replaces
        self.plan = plan
        self.executor = executor
        self.progress = progress
        self.on_progress = on_progress
        self.faults = Faults.from_env(index_path / STAGING_DIR / "faults")
        # a new index is created once its source is staged; a run that fails before its first commit: ``_undo``
        self.settings, self.made_folder = settings, not index_path.exists()
        self.made_manifest = not (index_path / "manifest.json").exists()
        self.index = None if self.made_manifest else Index.create(index_path, settings)
        self.committed = False
        self.ledger = Ledger(index_path)
        self.shard_size = shard_size
        self.job = ShardJob(index_path=str(index_path), chunk=plan.chunk, enrich=plan.enrich, embed=embed,
                            faults=self.faults, embed_placement=plan.embed_placement,
                            embed_batch_rows=plan.embed_options.get("batch_size") or EMBED_BATCH_ROWS)
        self.report = IngestReport(index=str(index_path), executor=executor)
        self.tracker: ProgressTracker | None = None
        self.stager: Stager | None = None
        self.run_ids: set[str] = set()  # with replace: the ids this run committed, so a later copy counts once

    def finished(self) -> set[str]:
        return finished_shards(self.index, self.ledger)

    def _open_index(self) -> None:
        from operators.store import Index

        if self.index is None:
            self.index = Index.create(self.path, self.settings)

    def _undo(self, running: Running, *, interrupted: bool = False) -> None:
        """After a failure before the first commit: remove the index folder (or manifest) this run created,
        unless another ingest of it runs or committed (it created them too, as far as it knows). One ``interrupted``
        (Ctrl-C, SIGTERM) after staging keeps a folder it made but its manifest, as one that was there: the same
        command resumes from the staged source, not reading it all again (a failed check still leaves none)."""
        if self.stager is not None:  # the next run lists the kept vectors again
            reuse.remove(self.stager.dir)
        if self.committed or not self.made_manifest or not running.alone() or self._others_committed():
            return
        staged = self.stager is not None and (self.stager.dir / STATE_FILE).exists()
        if self.made_folder and not (interrupted and staged):
            shutil.rmtree(self.path, ignore_errors=True)
        else:
            (self.path / "manifest.json").unlink(missing_ok=True)

    def _others_committed(self) -> bool:
        """Whether another ingest committed into this index meanwhile (it made the index too, and needs it)."""
        from operators.store import Index
        from operators.store.errors import IndexStoreError

        try:
            return bool(finished_shards(Index.open(self.path, verify=False), self.ledger))
        except IndexStoreError:  # no manifest (or none readable): nothing of another ingest's to keep
            return False

    def _track(self, stage: Stage, docs_total: int | None, shard_docs: dict[str, int] | None = None):
        self.tracker = ProgressTracker(stage, docs_total=docs_total, shard_docs=shard_docs, bar=self.progress,
                                       callback=self.on_progress)
        return self.tracker

    # -- ingest --------------------------------------------------------------------------

    def ingest(self) -> IngestReport:
        with Running(self.path) as running:
            try:
                return self._ingest()
            except BaseException as error:
                self._undo(running, interrupted=isinstance(error, KeyboardInterrupt))
                raise

    def _ingest(self) -> IngestReport:
        started = time.perf_counter()
        finished = self.finished()
        # the same documents at another path resume; to replace what the index holds, they are ingested again
        moved = resent = earlier_key(self.plan.read, self.path, self.shard_size, finished)
        if moved is not None and self.replace:
            log.warning(RESENT + " (last read from %s); with replace=True they are ingested again, as a source of "
                        "their own: every document is embedded again and replaces the index's copy (one deleted from "
                        "the index since comes back)",
                        last_path(self.path, moved))
            moved = None
        if moved is not None:
            log.info("the source's documents are those of staged source %s, ingested from another path: resuming "
                     "it", moved)
        self.stager = Stager(self.plan.read, self.path, self.shard_size, key=moved, duplicates=self.replace,
                             sync=self.sync)
        self.shard_size = self.stager.shard_size  # the source's own when none was given
        self.job.staging_dir = str(self.stager.dir)
        mismatch = job_mismatch(self.stager.dir, self.stager.key, job_params(self.job), finished)
        if self.executor == "ray" and not finished:  # a new index: Ray will be wanted, and starts while staging goes
            from flows.executors.ray_env import start_ray_early

            start_ray_early()
        with self._track("staging", None) as tracker:
            shards = self.stager.stage(finished, on_docs=tracker.read)
            if self.stager.reused:
                tracker.staged_before(sum(s.docs for s in shards))
        if self.made_manifest:  # kept for the command that resumes it, should it stop before its first commit
            first_ingest.record_settings(self.stager.dir, self.settings)
        refused.clear(self.stager.dir)  # staged again: running (or interrupted) from here on, until refused again
        self._open_index()
        for shard in shards:  # committed by a run that died before deleting its staged files
            if shard.id in finished:
                self.stager.discard(shard.id)
        todo = [s for s in shards if s.id not in finished]
        check_job(self.path, self.stager.dir, job_params(self.job), mismatch, nothing_to_do=not todo,
                  resume=resume_command(self.path, self.stager.key) if mismatch and todo else None)
        live = None if self.replace or not todo else refused.first_live(  # nothing to do: no ids to read
            self.index, ((s.id, self.stager.docs_path(s.id)) for s in todo), self.stager.key,
            self.delete_doc_ids | self.stager.retiring_ids)
        if live is not None:  # the shards before it commit, as they would have; it and the rest are not embedded
            todo = todo[:[s.id for s in todo].index(live[0])]
        self._keep_vectors(todo)
        r, n = self.report, len(shards)
        r.docs_total, r.shards_total, r.shards_skipped = sum(s.docs for s in shards), n, n - len(todo)
        if not todo:  # all done: run again to mend a damaged shard, it said "already done" and nothing else
            warn_damaged(self.index)
        with self._track("ingest", sum(s.docs for s in todo), {s.id: s.docs for s in todo}) as tracker:
            if self.executor == "local":
                self._run_local([s.id for s in todo])
            else:
                from flows.ingestion.ray_pipeline import run_shards

                order = [s.id for s in todo]  # with --replace, a later copy of an id must commit after the first
                commit = in_order(order, self._commit) if self.replace else self._commit
                run_shards(self.job, order, commit, embed_options=self.plan.embed_options,
                           on_embedded=tracker.embedded, prepare_actors=self.plan.chunk_concurrency)
        if live is not None:
            refused.record_or_forget(self.stager.dir, *live, committed=bool(self.stager.own(self.finished())))
            raise refused.moved_and_changed(live[1], self.plan.read, self.path, finished) if self.stager.sync and \
                not source_shards(self.stager.key, finished) else refused.in_ingestion_terms(live[1], self.stager.sync)
        resync.finish(self)  # with sync: the documents the source no longer has go
        self.ledger.supersede_read_failures(self.stager.own(done := self.finished()), done, self.stager.files(),
                                            failure_here(self.path, resent, self.stager.params))
        return self._finish(started)

    def _keep_vectors(self, todo: list) -> None:
        """Let the embed step take the index's vector of a chunk whose text it holds, among the documents this run
        replaces (a sync's, ``--replace``'s, a re-uploaded file's): ``flows.ingestion.reuse``."""
        replaced = self.stager.retiring_ids | self.delete_doc_ids
        if self.replace and todo:
            replaced |= reuse.replaced_ids(self.stager.docs_path(s.id) for s in todo)
        if todo and replaced and self.job.embed is not None:
            self.job.reuse = reuse.write(self.path, self.stager.dir, replaced, self.job.embed)

    def _run_local(self, shards: list[str]) -> None:
        """Shards in order, in-process: one shard is read, chunked and embedded in a thread while the
        one before it is written and committed here, so two cores share the work (the tokenizers,
        embedding_bag, FAISS and Parquet release the GIL); commits stay in shard order.

        On Ctrl-C (or any error here) the thread is told to stop and is not waited for: it drops its shard after
        the encoder call under way (``Embedder``), and the interpreter's exit waits for that call, not the shard
        (``ahead.Ahead``: why not a thread pool)."""
        from flows.ingestion.ahead import Ahead

        chunker, enrichers = make_chunker(self.job), make_enrichers(self.job)
        stop = threading.Event()
        embedder = Embedder(self.job, stop=stop, on_encoded=self.tracker.encoded) \
            if shards and self.job.embed is not None else None

        def embedded(shard: str):
            started = time.perf_counter()
            staged = staged_unless_done(self.index, shard, self.stager.load)
            if staged is None:  # another ingest of the same source committed it meanwhile
                return None
            docs, read_failures = staged
            if stop.is_set():
                raise EmbedStopped(shard)
            rows, n, kept = prepare(self.job, shard, docs, chunker, enrichers), 0, 0
            if embedder is not None:
                rows, n, kept = embedder(rows)
            return started, docs, read_failures, rows, n, kept

        ahead = Ahead(embedded)
        try:
            for shard in shards[:1]:
                ahead.submit(shard)
            for i, shard in enumerate(shards):
                done = ahead.result()
                for later in shards[i + 1:i + 2]:
                    ahead.submit(later)
                if done is None:
                    self._commit(ShardResult.elsewhere(shard))
                    continue
                started, docs, read_failures, rows, n, kept = done
                self._commit(write(self.job, self.index, shard, rows, lambda d=docs, f=read_failures: (d, f),
                                   chunks_embedded=n, chunks_reused=kept, started=started))
        except BaseException:
            stop.set()
            ahead.close(wait=False)
            raise
        ahead.close()

    def _finish(self, started: float) -> IngestReport:
        if self.delete_doc_ids and self.index is not None:  # no commit to ride on (nothing new: a resumed source)
            self.index.delete(doc_ids=self.delete_doc_ids)
        if self.stager is not None:
            reuse.remove(self.stager.dir)
        self.report.seconds = round(time.perf_counter() - started, 3)
        self.report.open_failures = len(self.ledger.open_failures(self.finished()))
        return self.report

    def retry(self) -> IngestReport:
        """Process the ledger's open failures, and only those (``flows.ingestion.retry``)."""
        return retry(self)


def ingest(
    source: str | Path | dict | None,
    index: str | Path,
    *,
    settings: Any = None,
    shard_size: int | None = None,
    executor: Literal["ray", "local"] = "ray",
    chunk: dict[str, Any] | Literal[False] | None = None,
    progress: bool = True,
    spec: str | Path | dict | None = None,
    retry_failed: bool = False,
    colbert: str | None = None,
    on_progress: IngestProgressCallback | None = None,
    replace: bool = False,
    delete_doc_ids: Iterable[str] = (),
    encoding: str | None = None,
    fields: dict[str, str] | None = None,
    sync: bool = False,
) -> IngestReport:
    """Ingest ``source`` into the index directory ``index`` (created if needed); resumable.

    ``source``: a JSONL file or glob, a BEIR folder, a Parquet/CSV file, or
    ``{"op": ..., "params": ...}``; None takes the spec's read step. ``settings``: an
    ``IndexSettings`` (must match an existing index) or a dict overriding the existing
    index's settings, else the spec's ``index_settings``, else the defaults;
    ``{"dense": False}`` builds BM25 only and never loads an encoder. ``chunk``: chunker
    params, ``False`` for none, None for the spec's chunk step (no spec: none, so docno
    is the source id). ``spec``: an ingest flow spec (``flows/specs/ingest.yaml``) for the
    read/chunk/embed steps and the embed step's Ray resources. ``retry_failed``:
    process only the ledger's open failures. ``colbert``: a ColBERT model reference; after
    ingestion, precompute its document tokens into the index for ``rerank.colbert``
    (``operators.store.token_store``). ``progress``: the progress bars on stderr; ``on_progress``: called
    with an ``IngestProgress`` as documents are read, embedded and committed. ``replace``: a document whose id
    is in the index already replaces it (its old passages are deleted in the commit that adds the new ones);
    without it, such a document fails its shard's commit. ``delete_doc_ids``: documents deleted by the first
    commit, so that a search sees them go when the new ones arrive (a re-sent file's pages that it no longer has).
    ``encoding``: the source files' text encoding (the read step's ``encoding`` param); without it, UTF-8, and a
    guess for a file that is not UTF-8 (named in a warning). ``fields``: which of the records' fields hold the id,
    the text and the title (``{"text_field": "body"}``: the read step's ``id_field``, ``text_field``,
    ``title_field``), for a CSV or JSONL whose columns are not BEIR's. ``sync``: a source whose ingested documents
    changed since (a file edited or removed) is followed, not refused: its changed part is ingested again and
    the documents it no longer has are deleted (``flows.ingestion.resync``).
    """
    delete_doc_ids = doc_ids_to_delete(delete_doc_ids)
    checked = check_ingest(source, index, settings=settings, shard_size=shard_size, executor=executor, chunk=chunk,
                           spec=spec, retry_failed=retry_failed, colbert=colbert, encoding=encoding, fields=fields,
                           replace=replace, sync=sync)
    # int(): a numpy integer passes the check but not json.dumps of the staging plan
    run = _Run(checked.index_path, checked.plan, checked.settings, checked.embed,
               shard_size=None if shard_size is None else int(shard_size), executor=executor, progress=progress,
               on_progress=on_progress, replace=replace, delete_doc_ids=delete_doc_ids, sync=sync)
    with refused_by_disk(checked.index_path, "ingesting"):  # staging, the failure ledger: the store's writes say so
        report = run.retry() if retry_failed else run.ingest()
    if colbert:
        from operators.store.token_store import build_token_store

        report.colbert_store = str(build_token_store(run.index, colbert, progress=progress).folder)
    return report
