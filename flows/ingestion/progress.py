"""What an ingestion shows while it runs: documents counted as they are embedded, not only as shards commit.

A shard of thousands of documents takes minutes to embed, and a bar that moved only when
a shard committed sat at zero all that time and looked hung. The embed step reports each
encoder batch's new documents (in-process through a callback; on Ray the embed actors
report through the driver's reporter actor, ``ray_pipeline``). A commit then adds what is
left of its shard: documents that failed, or were never embedded (BM25-only indices). So
each document is counted once, even when Ray embeds a shard again after a worker died.

``ProgressTracker`` feeds the tqdm bar and an optional callback with ``IngestProgress``
events. Either may be off. It takes reports from several threads. Off a terminal (a log,
``ray job submit``) the bar's carriage-return redraws would fill the log, so it prints
lines instead, as ``tessera run`` and ``bench`` do: one per committed shard, one at the end
of staging, and one at most every ``HEARTBEAT_S`` while a shard is embedded, also when only chunks moved (one
large document); those with documents done say the pace so far and the time left.
A Jupyter kernel's stderr is no terminal either, but a notebook rewrites a line at each carriage return (or
shows ``tqdm.auto``'s widget): there the bar is drawn, where the lines filled the cell.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Literal

from flows.progress import in_notebook, redraws, time_left

Stage = Literal["staging", "ingest", "retry"]
#: Off a terminal, a shard still being embedded prints how far it got at most this often (seconds).
HEARTBEAT_S = 30.0


@dataclass(frozen=True)
class IngestProgress:
    """Where an ingestion is: its stage, documents done so far (read, or embedded and committed), shards committed;
    in-process (``executor="local"``), also the chunks given their vectors so far, of ``chunks_total``, those of the
    shards chunked so far (a shard is chunked as its embedding begins): a document of thousands of chunks counts
    once, after its first encoder call, while these move with every call. 0 and 0 on Ray, and without an encoder."""

    stage: Stage
    docs: int
    docs_total: int | None
    shards: int = 0
    shards_total: int = 0
    failures: int = 0
    chunks: int = 0
    chunks_total: int = 0


IngestProgressCallback = Callable[[IngestProgress], None]


class ProgressTracker:
    """One stage's counts; a context manager that opens and closes its bar."""

    def __init__(self, stage: Stage, *, docs_total: int | None = None, shard_docs: dict[str, int] | None = None,
                 bar: bool = True, callback: IngestProgressCallback | None = None):
        self.stage = stage
        self.docs_total = docs_total
        self.shard_docs = shard_docs or {}  # documents per shard: a shard embedded twice counts once
        self.show = bar
        self.notebook = bar and in_notebook()  # a Jupyter kernel: tqdm.auto's bar, redrawn in its cell
        self.lines = bar and not redraws() and not self.notebook  # off a terminal (or on a dumb one): lines, no bar
        self.callback = callback
        self.docs = self.shards = self.failures = self.chunks = self.chunks_total = 0
        self._counted: dict[str, int] = {}
        self._committed: set[str] = set()
        self._lock = threading.Lock()
        self._bar = None
        self.staged = ""  # staging: why no document was read (``staged_before``)
        self._last_line = self._started = time.monotonic()

    def __enter__(self) -> "ProgressTracker":
        if self.notebook:
            from tqdm.auto import tqdm
        else:
            from tqdm import tqdm

        if self.lines:
            if self.shard_docs:
                self._line(f"{self.docs_total} docs in {len(self.shard_docs)} shard(s)")
        else:
            self._bar = tqdm(total=self.docs_total, desc=self.stage, unit="docs", unit_scale=True,
                             disable=not self.show, file=sys.stderr, dynamic_ncols=True, mininterval=0.5)
            if self.shard_docs:
                self._bar.set_postfix(shards=f"0/{len(self.shard_docs)}")
        self._emit()
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.lines and self.stage == "staging" and exc[0] is None:
            self._line(f"{self.docs} docs" + (f", {self.staged}" if self.staged else ""))

    def staged_before(self, docs: int) -> None:
        """Staging found the source's ``docs`` documents staged by an earlier run, the source unchanged: counted,
        and said so (a rerun's ``staging: N docs`` read as if it staged the source again)."""
        self.staged = "staged before, the source unchanged"
        if self._bar is not None:
            self._bar.set_postfix_str(self.staged)
        self.read(docs)

    def read(self, docs: int) -> None:
        """``docs`` more documents read (staging)."""
        with self._lock:
            self._advance(docs)

    def embedded(self, shard: str, docs: int) -> None:
        """``docs`` more documents of ``shard`` embedded; ignored once the shard is committed."""
        with self._lock:
            docs = self._new_docs(shard, docs)
            if docs:
                self._advance(docs)

    def encoded(self, docs: dict[str, int], chunks: int, more: int) -> None:
        """In-process, an encoder call's news in one event: ``docs`` more documents by shard (as ``embedded``) and
        ``chunks`` more chunks given their vectors; ``more`` chunks to embed (a call's, as it begins: sent with the
        next news, not alone)."""
        with self._lock:
            self.chunks += chunks
            self.chunks_total += more
            new = sum(self._new_docs(shard, n) for shard, n in docs.items())
            if self._bar is not None and chunks:
                self._bar.set_postfix(self._postfix())  # redrawn: no document may be done for minutes
            if new:
                self._advance(new)
            elif chunks:  # a document of thousands of chunks: no document done for minutes, its chunks move
                if self.lines and time.monotonic() - self._last_line >= HEARTBEAT_S:
                    self._heartbeat()
                self._emit()

    def _new_docs(self, shard: str, docs: int) -> int:
        """How many of ``docs`` more documents of ``shard`` count (none once it is committed, at most its own)."""
        if shard in self._committed:
            return 0
        counted = self._counted.get(shard, 0)
        room = self.shard_docs.get(shard)
        docs = docs if room is None else max(0, min(docs, room - counted))
        if docs:
            self._counted[shard] = counted + docs
        return docs

    def committed(self, shard: str, docs: int, failures: int) -> None:
        """``shard`` committed with ``docs`` documents: what its embedding did not count yet is counted now."""
        with self._lock:
            self._committed.add(shard)
            self.shards += 1
            self.failures += failures
            self._advance(max(0, docs - self._counted.pop(shard, 0)), heartbeat=False)  # documents, then shards
            if self._bar is not None:
                self._bar.set_postfix(self._postfix())
            elif self.lines:
                self._line(f"shard {self._shards()} committed, {self._done()} docs, {self.failures} failed"
                           + self._pace())

    def _advance(self, docs: int, *, heartbeat: bool = True) -> None:
        self.docs += docs
        if self._bar is not None:
            self._bar.update(docs)
        elif self.lines and heartbeat and docs and time.monotonic() - self._last_line >= HEARTBEAT_S:
            self._heartbeat()
        self._emit()

    def _heartbeat(self) -> None:
        chunks, pace = self._chunks(), self._pace()
        if chunks and len(self.shard_docs) == 1 and 0 < self.chunks < self.chunks_total:
            # one shard: every chunk to embed is known, and its documents' pace tells nothing once they all count
            pace = ", " + time_left(time.monotonic() - self._started, self.chunks, self.chunks_total - self.chunks)
        self._line(f"{self._done()} docs" + (f", shards {self._shards()}" if self.shard_docs else "") + chunks + pace)

    def _postfix(self) -> dict[str, str | int]:
        """The bar's counts beside its documents: a 20 MB document's bar sat at 1/1 (counted at its first encoder
        call) for the minutes of its 27,000 chunks' embedding, the chunks done said nowhere."""
        postfix: dict[str, str | int] = {"shards": self._shards(), "failures": self.failures}
        if self.chunks_total:
            postfix["chunks"] = f"{self.chunks}/{self.chunks_total}"
        return postfix

    def _chunks(self) -> str:
        """``, chunks 1024/27000 embedded (35/s)`` while chunks are embedded in-process; nothing on Ray or
        without an encoder."""
        if not self.chunks_total or self.stage == "staging":
            return ""
        seconds = time.monotonic() - self._started
        rate = f" ({self.chunks / seconds:.0f}/s)" if self.chunks and seconds > 0 else ""
        return f", chunks {self.chunks}/{self.chunks_total} embedded{rate}"

    def _shards(self) -> str:
        return f"{self.shards}/{len(self.shard_docs) or '?'}"

    def _pace(self) -> str:
        """``, 1624 docs/s, about 0:00:18 left`` at the stage's pace so far (a log's lines said counts alone: how
        long a 100,000-document ingest would take was the reader's sum)."""
        seconds = time.monotonic() - self._started
        if not self.docs or seconds <= 0:
            return ""
        rate = self.docs / seconds
        text = f", {rate:.0f} docs/s" if rate >= 10 else f", {rate:.2g} docs/s"  # 4 docs in 11 s were "0 docs/s"
        if self.docs_total and self.docs < self.docs_total:
            text += ", " + time_left(seconds, self.docs, self.docs_total - self.docs)
        return text

    def _done(self) -> str:
        return f"{self.docs}/{self.docs_total}" if self.docs_total is not None else str(self.docs)

    def _line(self, text: str) -> None:
        self._last_line = time.monotonic()
        print(f"{self.stage}: {text}", file=sys.stderr, flush=True)

    def _emit(self) -> None:
        if self.callback is not None:
            self.callback(IngestProgress(self.stage, self.docs, self.docs_total, self.shards, len(self.shard_docs),
                                         self.failures, self.chunks, self.chunks_total))
