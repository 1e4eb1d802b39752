"""The embed step of an ingestion, in-process and on each Ray embed actor: chunk rows in, a ``vector`` column out.

A batch of ``embed_batch_rows`` rows goes to the encoder longest texts first, in parts of
about ``EMBED_PART_SECONDS`` of work (16 rows or a power of two above): sentence-transformers
sorts one call's texts so, hence the forward passes are those of one call over the whole
batch. After each part the progress bar moves and a stop (Ctrl-C) is noticed, so both come
a second or two apart on a slow CPU too. A part the encoder fails on is bisected by document
until the failing documents are alone (``log2(part)`` extra calls for one bad document,
where retrying one at a time would cost a call per document); a document that fails on
its own is failed. In a sync, a chunk whose text the index already holds takes its vector from there instead of
the encoder (``flows.ingestion.reuse``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa

from flows.ingestion.reuse import Reuse
from flows.ingestion.shards import PIECES, ShardJob
from operators.tables import set_column

#: Seconds of encoding per call within a batch: progress and a stop come between two calls.
EMBED_PART_SECONDS = 1.0
#: Fewest rows per call: a CPU's forward pass (operators.models.batching); part sizes are powers of two from
#: here, so whole forward passes of 16 (CPU) or 128 (GPU) rows.
EMBED_PART_ROWS = 16


class EmbedStopped(Exception):
    """The embedder saw its stop event (the run was interrupted) and dropped the shard it was embedding."""


def embed_operator(embed: dict[str, Any], placement: dict[str, Any] | None):
    """The embed step's operator; with a ``placement``, its proxy on that Serve deployment (no model loads here:
    even the vector dimension comes from the deployment)."""
    from operators.embed.sentence_transformer import SentenceTransformerEmbedder

    op = SentenceTransformerEmbedder(embed, step_id="embed")
    if placement:
        from flows.placement import place

        op = place(op, **placement)
    return op


class Embedder:
    """The embed step's operator with failure isolation and the fault hooks.

    ``on_progress(shard, docs)`` hears after each encoder call how many more documents of a
    shard it reached, so progress moves while a large shard is embedded. ``on_encoded(docs, chunks, more)``, given
    instead (in-process), hears the same documents by shard and the chunks given their vectors then, so a document
    of thousands of chunks moves too; ``more``: chunks to embed of a call, said (with none done) as the call begins.
    Once ``stop`` is set, the next call raises ``EmbedStopped`` instead: an interrupted run waits for one call, not a
    shard."""

    def __init__(self, job: ShardJob, on_progress: Callable[[str, int], None] | None = None,
                 stop: threading.Event | None = None,
                 on_encoded: Callable[[dict[str, int], int, int], None] | None = None):
        self.job = job
        self.on_progress, self.on_encoded = on_progress, on_encoded
        self.reporting = on_progress is not None or on_encoded is not None
        self.stop = stop
        self.op = embed_operator(job.embed or {}, job.embed_placement)
        self.part_rows = EMBED_PART_ROWS  # grows to EMBED_PART_SECONDS of work once a call has been timed
        self.reuse = None
        if job.reuse:  # the model loads when a chunk needs it: a sync whose text is all unchanged loads none
            from operators.store.layout import read_manifest

            self.dim = read_manifest(Path(job.index_path)).settings.dim  # the encoder's (checked as the run began)
            self.reuse = Reuse(job.reuse, self.dim)
        else:
            self.op.ensure_setup()
            self.dim = self.op.dimension

    def __call__(self, table: pa.Table) -> tuple[pa.Table, int, int]:
        """``table`` with a ``vector`` column (zeros on failed rows) and failures marked; the rows encoded, and
        those whose vector a sync took from the index (``reuse``)."""
        n = table.num_rows
        vectors = np.zeros((n, self.dim), dtype=np.float32)
        errors = table.column("_error").to_pylist() if n else []
        stages = table.column("_stage").to_pylist() if n else []
        todo = np.array([e is None for e in errors], dtype=bool)
        doc_ids = table.column("doc_id").cast(pa.string()).to_pylist() if n else []
        shards = table.column("_shard").to_pylist() if n else []
        texts = self.op.texts(table) if n else []
        rows = np.flatnonzero(todo)
        if self.on_encoded is not None and len(rows):
            self.on_encoded({}, 0, len(rows))
        seen: set[str] = set()
        reached: set[tuple[str, str]] = set()  # (shard, doc id) of the documents reported
        reused = self.reuse.fill(rows, texts, vectors) if self.reuse is not None and len(rows) else rows[:0]
        if len(reused):
            rows = np.setdiff1d(rows, reused)
            if self.reporting:
                self._report(reused.tolist(), shards, doc_ids, reached)
        if len(rows):  # loaded here, not in the first call: a failure to load is the run's, not a document's
            self.op.ensure_setup()
        # the pieces come from the encoder's tokenizer: read only for rows that meet it
        bodies = self.op.piece_bodies(table, PIECES) if len(rows) and PIECES in table.column_names else None
        step = max(1, self.job.embed_batch_rows)
        for start in range(0, len(rows), step):
            batch = sorted(rows[start:start + step].tolist(), key=lambda i: -len(texts[i]))  # as encode sorts
            done = 0
            while done < len(batch):
                if self.stop is not None and self.stop.is_set():
                    raise EmbedStopped("stopped")
                part, started = batch[done:done + self.part_rows], time.perf_counter()
                self._encode(part, texts, bodies, doc_ids, vectors, errors, stages)
                self._timed(len(part), time.perf_counter() - started, step)
                done += len(part)
                if self.reporting:
                    self._report(part, shards, doc_ids, reached)
            for shard in dict.fromkeys(shards[i] for i in batch):
                if shard not in seen:  # half-way into a shard's first batch: the worker may die here
                    seen.add(shard)
                    self.job.faults.maybe_kill_worker(shard)
        from operators.embed.sentence_transformer import vectors_to_arrow

        if PIECES in table.column_names:
            table = table.drop_columns([PIECES])  # used: not sent on to the writer
        out = set_column(table, "vector", vectors_to_arrow(vectors) if n else
                         pa.array([], pa.list_(pa.float32(), self.dim)))
        out = set_column(out, "_error", pa.array(errors, pa.string()))
        return set_column(out, "_stage", pa.array(stages, pa.string())), len(rows), len(reused)

    def _timed(self, rows: int, seconds: float, most: int) -> None:
        """The next part's size: the power of two of rows (from ``EMBED_PART_ROWS``, at most ``most``) that the
        last call's speed does in about ``EMBED_PART_SECONDS``."""
        fit = rows * EMBED_PART_SECONDS / max(seconds, 1e-6)
        size = EMBED_PART_ROWS
        while size * 2 <= min(fit, most):
            size *= 2
        self.part_rows = size

    def _report(self, batch: list[int], shards: list[str], doc_ids: list[str], reached: set[tuple[str, str]]) -> None:
        """Tell ``on_progress`` the documents of ``batch`` not reported before, per shard (``on_encoded`` those and
        ``batch``'s chunks, in one call)."""
        new: dict[str, int] = {}
        for i in batch:
            if (shards[i], doc_ids[i]) not in reached:
                reached.add((shards[i], doc_ids[i]))
                new[shards[i]] = new.get(shards[i], 0) + 1
        if self.on_encoded is not None:
            self.on_encoded(new, len(batch), 0)
            return
        for shard, docs in new.items():
            self.on_progress(shard, docs)

    def _encode(self, rows: list[int], texts, bodies, doc_ids, vectors, errors, stages) -> None:
        """Encode ``rows`` (``bodies``: their pieces, where known); on an error, bisect by document down to the
        documents that fail alone."""
        try:
            self.job.faults.check_embed(doc_ids[i] for i in rows)
            chosen = [texts[i] for i in rows]
            if bodies is None:  # no pieces from the chunker (and a Serve deployment's proxy takes none)
                vectors[rows] = self.op.encode(chosen)
            else:
                vectors[rows] = self.op.encode(chosen, [bodies[i] for i in rows])
            return
        except Exception as err:  # noqa: BLE001 - isolated below, recorded in the ledger
            docs = list(dict.fromkeys(doc_ids[i] for i in rows))
            if len(docs) == 1:
                message = f"{type(err).__name__}: {err}"
                for i in rows:
                    errors[i], stages[i] = message, "embed"
                return
        half = set(docs[: len(docs) // 2])
        self._encode([i for i in rows if doc_ids[i] in half], texts, bodies, doc_ids, vectors, errors, stages)
        self._encode([i for i in rows if doc_ids[i] not in half], texts, bodies, doc_ids, vectors, errors, stages)
