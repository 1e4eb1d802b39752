"""What an ingestion shows while it runs: documents counted as they are embedded, not only as shards commit.

A shard of thousands of documents takes minutes to embed, and a bar that moved only when
a shard committed sat at zero all that time and looked hung. The embed step reports each
encoder batch's new documents (in-process through a callback; on Ray the embed actors
report through the driver's reporter actor, ``ray_pipeline``). A commit then adds what is
left of its shard: documents that failed, or were never embedded (BM25-only indices). So
each document is counted once, even when Ray embeds a shard again after a worker died.

``ProgressTracker`` feeds the tqdm bar and an optional callback with ``IngestProgress``
events. Either may be off. It takes reports from several threads.
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Callable, Literal

Stage = Literal["staging", "ingest", "retry"]


@dataclass(frozen=True)
class IngestProgress:
    """Where an ingestion is: its stage, documents done so far (read, or embedded and committed), shards committed."""

    stage: Stage
    docs: int
    docs_total: int | None
    shards: int = 0
    shards_total: int = 0
    failures: int = 0


IngestProgressCallback = Callable[[IngestProgress], None]


class ProgressTracker:
    """One stage's counts; a context manager that opens and closes its bar."""

    def __init__(self, stage: Stage, *, docs_total: int | None = None, shard_docs: dict[str, int] | None = None,
                 bar: bool = True, callback: IngestProgressCallback | None = None):
        self.stage = stage
        self.docs_total = docs_total
        self.shard_docs = shard_docs or {}  # documents per shard: a shard embedded twice counts once
        self.show = bar
        self.callback = callback
        self.docs = self.shards = self.failures = 0
        self._counted: dict[str, int] = {}
        self._committed: set[str] = set()
        self._lock = threading.Lock()
        self._bar = None

    def __enter__(self) -> "ProgressTracker":
        from tqdm import tqdm

        self._bar = tqdm(total=self.docs_total, desc=self.stage, unit="docs", unit_scale=True, disable=not self.show,
                         file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
        if self.shard_docs:
            self._bar.set_postfix(shards=f"0/{len(self.shard_docs)}")
        self._emit()
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.close()

    def read(self, docs: int) -> None:
        """``docs`` more documents read (staging)."""
        with self._lock:
            self._advance(docs)

    def embedded(self, shard: str, docs: int) -> None:
        """``docs`` more documents of ``shard`` embedded; ignored once the shard is committed."""
        with self._lock:
            if shard in self._committed:
                return
            counted = self._counted.get(shard, 0)
            room = self.shard_docs.get(shard)
            docs = docs if room is None else max(0, min(docs, room - counted))
            if docs:
                self._counted[shard] = counted + docs
                self._advance(docs)

    def committed(self, shard: str, docs: int, failures: int) -> None:
        """``shard`` committed with ``docs`` documents: what its embedding did not count yet is counted now."""
        with self._lock:
            self._committed.add(shard)
            self.shards += 1
            self.failures += failures
            if self._bar is not None:
                self._bar.set_postfix(shards=f"{self.shards}/{len(self.shard_docs) or '?'}", failures=self.failures)
            self._advance(max(0, docs - self._counted.pop(shard, 0)))

    def _advance(self, docs: int) -> None:
        self.docs += docs
        if self._bar is not None:
            self._bar.update(docs)
        self._emit()

    def _emit(self) -> None:
        if self.callback is not None:
            self.callback(IngestProgress(self.stage, self.docs, self.docs_total, self.shards, len(self.shard_docs),
                                         self.failures))
