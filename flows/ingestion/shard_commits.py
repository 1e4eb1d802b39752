"""What the ingestion run does with each written shard: commit it (ledger, then manifest), in order, counting it in
the report and the progress bars, or count it as another ingest's.

Why apart from ``job``: a shard's commit, with its cases (every document failed, committed meanwhile by another
ingest of the same source, refused as a copy of a live document, a copy of an id with ``replace``), is one job; the
run's staging and processing another. The run (``job._Run``) inherits ``ShardCommits``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from flows.ingestion import refused
from flows.ingestion.faults import Faults
from flows.ingestion.ledger import Failure, Ledger
from flows.ingestion.progress import ProgressTracker
from flows.ingestion.report import IngestReport
from flows.ingestion.shards import ShardResult
from flows.ingestion.staging import Stager

log = logging.getLogger("tessera.ingest")


class ShardCommits:
    """The commits of an ingestion run (a base of ``job._Run``, which sets these attributes and
    ``finished``)."""

    path: Path
    faults: Faults
    ledger: Ledger
    report: IngestReport
    stager: Stager | None
    tracker: ProgressTracker | None
    replace: bool
    committed: bool
    delete_doc_ids: set[str]
    run_ids: set[str]
    index: Any  # operators.store.Index, open once the source is staged

    def _commit(self, result: ShardResult) -> None:
        """Ledger, then manifest, for one written shard (the driver's only writes)."""
        from operators.store import ShardInfo

        if result.done_elsewhere:  # another ingest of the same plan committed it meanwhile: nothing to do
            self._done_elsewhere(result.shard)
            return
        self.faults.maybe_crash_after_write(result.shard)
        failures = [Failure.from_dict(f) for f in result.failures]
        again = 0  # documents of this shard that an earlier shard of this run committed (a copy of an id, replace)
        gone = 0  # chunks of those earlier copies, which this shard's commit took out of the index
        # ``committed`` is set once the shard is recorded: a run interrupted in its first commit before then (Ctrl-C
        # while it waits for the lock or writes) is a run that failed before its first commit, and ``_undo`` takes
        # back the shard-less manifest it made (one interrupted just after the write finds the shard and keeps it)
        if result.info is None:  # every document failed: the ledger's attempt is the shard's commit
            if not self._record_empty(result.shard, failures):
                self._done_elsewhere(result.shard)
                return
            self.committed = True
        else:
            info = ShardInfo.model_validate_json(result.info)
            replaced = self.index.shard_doc_ids(info) if self.replace else set()
            if self.stager is not None and self.stager.retiring_ids:  # a sync: its own old copies go, no others
                replaced = self.index.shard_doc_ids(info) & self.stager.retiring_ids
            try:  # the ledger is written under the commit's lock, only by the ingest that commits the shard
                done = self.index.commit([info], replace_doc_ids=replaced | self.delete_doc_ids,
                                         before_write=lambda: self.ledger.record_attempt(result.shard, failures),
                                         refuse_live_doc_ids=refused.other_sources(self.stager and self.stager.key))
                self.committed = True
                self.delete_doc_ids = set()
            except BaseException as error:  # a resumed run processes the shard again: its folder is of no use
                self.index.discard([info])
                if refused.is_refusal(error):
                    if self.stager is not None:  # not interrupted: pending says so
                        refused.record(self.stager.dir, result.shard, error)
                    raise refused.in_ingestion_terms(error, self.stager is not None and self.stager.sync) from None
                raise
            if info.id in done.already:  # both ingests wrote it before either committed; the other was first
                self._done_elsewhere(result.shard)
                return
            again = len(replaced & self.run_ids)
            gone = sum(n for doc_id, n in done.tombstoned_docs.items() if doc_id in self.run_ids)
            self.run_ids |= replaced
        if self.stager is not None:
            self.stager.discard(result.shard)
        r = self.report
        r.shards_written += 1
        r.docs += result.docs - again
        r.chunks += result.chunks - gone
        r.chunks_embedded += result.chunks_embedded
        r.chunks_reused += result.chunks_reused
        r.failures += len(failures)
        if self.tracker is not None:
            staged = self.tracker.shard_docs.get(result.shard, result.docs)  # copies too: the bar counts them
            self.tracker.committed(result.shard, staged, len(failures))

    def _record_empty(self, shard: str, failures: list[Failure]) -> bool:
        """Record a shard whose every document failed, unless another ingest of the same source finished it
        first (both read it): checked and written under the index's lock, as a commit is. True if recorded."""
        from operators.store.layout import file_lock

        with file_lock(self.path):
            if shard in self.finished():
                return False
            self.ledger.record_attempt(shard, failures, empty=True)
        return True

    def _done_elsewhere(self, shard: str) -> None:
        """Count a shard that another ingest of the same source committed as done by it, not by this run."""
        log.info("shard %s was committed by another ingest of the same source meanwhile", shard)
        self.report.shards_skipped += 1
        self.report.shards_elsewhere += 1
        if self.stager is not None:  # staged again by this run after the other discarded it: no longer needed
            self.stager.discard(shard)
        if self.tracker is not None:
            self.tracker.committed(shard, 0, 0)


def in_order(order: list[str], commit):
    """``commit`` for results that may come in any order (Ray), called in ``order``."""
    pending: dict[str, ShardResult] = {}
    queue = list(reversed(order))

    def ordered(result: ShardResult) -> None:
        pending[result.shard] = result
        while queue and queue[-1] in pending:
            commit(pending.pop(queue.pop()))
    return ordered
