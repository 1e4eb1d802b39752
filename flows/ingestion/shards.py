"""Per-shard work, the same in-process and on Ray Data: prepare (chunk), embed, write.

Rows travel with four internal columns: ``_shard`` (its shard id), ``_shard_rows``
(how many rows that shard has in all, so a stage can tell a whole shard from part of
one), ``_error`` and ``_stage`` (null, or why and where the row's document failed). A
failed document keeps one row per chunk (or one placeholder row when chunking failed)
so its failure reaches the writer in-band, with no side channel; the writer leaves
every row of a failed document out of the shard and reports it for the ledger.

The embed step's work on those rows: ``flows.ingestion.embedder``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from flows.ingestion import reuse
from flows.ingestion.column_types import left_out
from flows.ingestion.duplicates import last_copies
from flows.ingestion.errors import ShardAlignmentError
from flows.ingestion.faults import Faults
from flows.ingestion.ledger import Failure, finished_shards
from flows.ingestion.staged_files import read_staged
from operators.store.errors import ShardDataError
from operators.tables import concat, set_column

#: The chunks' piece ids, from the chunker to the encoder (``make_chunker``), never written.
PIECES = "_pieces"
INTERNAL = ("_shard", "_shard_rows", "_error", "_stage", PIECES)  # in column_types.OWN_COLUMNS too
#: ``_stage`` of ``elsewhere_rows``: the shard was committed by another ingest of the same source.
ELSEWHERE = "elsewhere"
#: Rows per batch when the embed step sets no batch size: a batch's texts are sorted by length together.
EMBED_BATCH_ROWS = 1024


@dataclass
class ShardJob:
    """What a worker needs to process shards (picklable, small)."""

    index_path: str
    staging_dir: str | None = None
    chunk: dict[str, Any] | None = None       # preprocess.chunk params; None: one chunk per document
    enrich: list[dict[str, Any]] = field(default_factory=list)  # row steps before chunking: {step, op, params}
    embed: dict[str, Any] | None = None       # embed.sentence_transformer params; None: no vectors
    embed_batch_rows: int = EMBED_BATCH_ROWS
    faults: Faults = field(default_factory=Faults)
    embed_placement: dict[str, Any] | None = None  # {deployment, app}: the encoder runs on that Serve deployment
    reuse: str | None = None  # a sync's vectors of unchanged text (``flows.ingestion.reuse``)

    def staged(self, shard: str) -> tuple[pa.Table, list[Failure]]:
        """A staged shard's documents and its unreadable records (``staging.read_staged``)."""
        return read_staged(self.staging_dir or ".", shard)


@dataclass
class ShardResult:
    """What writing one shard gave: its ShardInfo (None when no row survived) and its failures."""

    shard: str
    info: str | None                 # ShardInfo JSON
    docs: int
    chunks: int
    chunks_embedded: int
    failures: list[dict[str, Any]]
    chunks_reused: int = 0  # chunks whose vector a sync took from the index, their text unchanged
    seconds: float = 0.0
    #: Another ingest of the same source committed this shard (same plan, same id) while this one ran: done.
    done_elsewhere: bool = False

    def to_row(self) -> dict[str, Any]:
        return {"shard": self.shard, "info": self.info, "docs": self.docs, "chunks": self.chunks,
                "chunks_embedded": self.chunks_embedded, "chunks_reused": self.chunks_reused,
                "failures": json.dumps(self.failures, default=str),
                "seconds": self.seconds, "done_elsewhere": self.done_elsewhere}

    @classmethod
    def elsewhere(cls, shard: str) -> "ShardResult":
        return cls(shard=shard, info=None, docs=0, chunks=0, chunks_embedded=0, failures=[], done_elsewhere=True)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "ShardResult":
        return cls(**{**row, "failures": json.loads(row["failures"])})


def staged_unless_done(index, shard: str, load: Callable[[str], tuple[pa.Table, list[Failure]]]):
    """``load(shard)`` (its staged documents and read failures), or None when another ingest of the same source
    (the same shard ids, ``staging``) finished the shard (``ledger.finished_shards``): the finishing run deletes its
    staged files, maybe while this one reads them, so a missing file is asked about again. The local executor and
    Ray's prepare stage both ask this before preparing."""
    if shard in index.finished_shards():
        return None
    try:
        return load(shard)
    except FileNotFoundError:
        if shard in finished_shards(index):
            return None
        raise


def elsewhere_rows(shard: str) -> pa.Table:
    """The one placeholder row that carries a shard another ingest committed through Ray's embed and write
    stages (which embed and write nothing for it), so that its result still reaches the driver."""
    return pa.table({"_shard": [shard], "_shard_rows": pa.array([1], pa.int64()),
                     "_error": ["committed by another ingest"], "_stage": [ELSEWHERE]})


def is_elsewhere(rows: pa.Table) -> bool:
    """Whether ``rows`` (one shard's) are ``elsewhere_rows``."""
    return rows.num_rows == 1 and "_stage" in rows.column_names and rows.column("_stage")[0].as_py() == ELSEWHERE


# -- prepare: documents to chunks ---------------------------------------------------------


def make_chunker(job: ShardJob):
    """The job's chunker (None: it does not chunk). Built once per worker by the ingestion job and each Ray actor,
    and handed to ``prepare`` for each of their shards."""
    if job.chunk is None:
        return None
    from operators.preprocess.chunk import Chunker

    return Chunker({**job.chunk, "pieces_column": PIECES} if _pieces_fit(job) else job.chunk, step_id="chunk")


def _pieces_fit(job: ShardJob) -> bool:
    """Whether the chunker's piece ids are the embed step's own pieces of the chunks: the same tokenizer, reading
    the chunk's column, no prompt, in this process's model (not a Serve deployment). The encoder then need not
    tokenize the chunks again (``operators.models.piece_inputs``), and checks for itself that it may compose them."""
    chunk, embed = job.chunk or {}, job.embed
    if not chunk.get("tokenizer") or embed is None or job.embed_placement or embed.get("prompt"):
        return False
    if embed.get("input_column", "text") != chunk.get("text_column", "text"):
        return False
    from operators.models import DEFAULT_ENCODER, ModelNotFoundError
    from operators.preprocess._model_windows import ChunkTokenizerError, model_tokenizer

    try:
        own = model_tokenizer(embed.get("model") or DEFAULT_ENCODER).to_str()
    except (ChunkTokenizerError, ModelNotFoundError):  # no tokenizer.json; no model (the embed step says so)
        return False
    return own == model_tokenizer(chunk["tokenizer"]).to_str()


def make_enrichers(job: ShardJob) -> list:
    """The spec's row steps that enrich each document before chunking (analyze.dimensions ...); like
    ``make_chunker``, built once per worker and handed to ``prepare``."""
    from operators.registry import create

    return [create(step["op"], step["params"], step_id=step["step"]) for step in job.enrich]


def prepare(job: ShardJob, shard: str, docs: pa.Table, chunker=None, enrichers: list | None = None) -> pa.Table:
    """A shard's documents, enriched and cut into chunk rows, tagged with the internal columns."""
    chunker = chunker if chunker is not None else make_chunker(job)
    enrichers = enrichers if enrichers is not None else make_enrichers(job)
    docs = last_copies(docs)  # a shard staged with --replace may repeat an id: the last copy wins
    docs = docs.drop_columns([c for c in docs.column_names if left_out(c)])  # a source's fields so named
    docs = set_column(docs, "doc_id", docs.column("docno"))  # the source's id, kept by every chunk
    failed: list[pa.Table] = []
    for op in enrichers:
        docs, bad = _isolated(op, docs, op.step_id)
        failed += bad
    if chunker is None or docs.num_rows == 0:
        rows = docs
    else:
        rows, bad = _isolated(lambda d: _chunked(chunker, d), docs, "chunk")
        failed += bad
    rows = concat([rows, *failed])
    n = rows.num_rows
    for name, values in (("_shard", pa.array([shard] * n, pa.string())),
                         ("_shard_rows", pa.array([n] * n, pa.int64()))):
        rows = set_column(rows, name, values)
    for name in ("_error", "_stage"):
        if name not in rows.column_names:
            rows = set_column(rows, name, pa.nulls(n, pa.string()))
    return rows


def _isolated(step: Callable[[pa.Table], pa.Table], docs: pa.Table, stage: str) -> tuple[pa.Table, list[pa.Table]]:
    """``step`` over the documents; when it fails, over each one alone: (the output, the failed documents)."""
    try:
        return step(docs), []
    except Exception:  # noqa: BLE001 - find the documents that fail on their own
        good, bad = [], []
        for i in range(docs.num_rows):
            one = docs.slice(i, 1)
            try:
                good.append(step(one))
            except Exception as err:  # noqa: BLE001 - recorded in the ledger
                bad.append(_failed_rows(one, stage, err))
        return (concat(good) if good else docs.slice(0, 0)), bad


def _chunked(chunker, docs: pa.Table) -> pa.Table:
    out = chunker(docs.drop_columns(["doc_id"]))
    return out.drop_columns([c for c in ("chunk_id",) if c in out.column_names])


def _failed_rows(docs: pa.Table, stage: str, err: BaseException) -> pa.Table:
    message = f"{type(err).__name__}: {err}"
    n = docs.num_rows
    docs = set_column(docs, "_error", pa.array([message] * n, pa.string()))
    return set_column(docs, "_stage", pa.array([stage] * n, pa.string()))


def check_whole(table: pa.Table, where: str) -> list[tuple[str, pa.Table]]:
    """The table's shards, each checked to be whole (every row of it is here)."""
    if table.num_rows == 0:
        return []
    shards = table.column("_shard")
    out = []
    for shard in pc.unique(shards).to_pylist():
        rows = table.filter(pc.equal(shards, shard))
        expected = rows.column("_shard_rows")[0].as_py()
        if rows.num_rows != expected:
            raise ShardAlignmentError(f"{where} got {rows.num_rows} of the {expected} rows of shard {shard}; "
                                      "a shard's rows must stay in one block")
        out.append((shard, rows))
    return out


# -- write ------------------------------------------------------------------------------------


def write(job: ShardJob, index, shard: str, rows: pa.Table, docs_of: Callable[[], tuple[pa.Table, list[Failure]]],
          *, chunks_embedded: int = 0, chunks_reused: int = 0, started: float | None = None) -> ShardResult:
    """Write one whole shard's good rows; failed documents (all their rows) become ledger records. A shard that
    another ingest of the same source committed meanwhile (shard ids are the plan's, ``staging``) is done."""
    if shard in index.finished_shards():
        return ShardResult.elsewhere(shard)
    errors = rows.column("_error")
    failed_rows = rows.filter(pc.is_valid(errors)) if errors.null_count < rows.num_rows else rows.slice(0, 0)
    failed_ids = set(failed_rows.column("doc_id").cast(pa.string()).to_pylist())
    try:
        docs, read_failures = docs_of()
    except FileNotFoundError:  # its staged file goes once it is finished
        if shard in finished_shards(index):
            return ShardResult.elsewhere(shard)
        raise
    failures = [f.to_dict() for f in read_failures]
    if failed_ids:
        first: dict[str, tuple[str, str]] = {}
        for doc_id, error, stage in zip(failed_rows.column("doc_id").cast(pa.string()).to_pylist(),
                                        failed_rows.column("_error").to_pylist(),
                                        failed_rows.column("_stage").to_pylist()):
            first.setdefault(doc_id, (stage, error))
        for record in docs.to_pylist():
            doc_id = str(record.get("docno"))
            if doc_id in first:
                stage, error = first.pop(doc_id)
                record = json.loads(json.dumps(record, default=str))
                failures.append(Failure.of_document(stage, record, error).to_dict())
        keep = pc.invert(pc.is_in(rows.column("doc_id").cast(pa.string()), value_set=pa.array(sorted(failed_ids))))
        rows = rows.filter(keep)
    rows = rows.drop_columns([c for c in INTERNAL if c in rows.column_names])
    if job.embed is None and "vector" in rows.column_names:
        rows = rows.drop_columns(["vector"])
    try:
        made = reuse.fingerprint(job.embed, index.settings.encoder) if job.embed is not None else None
        info = index.write_shard(shard, rows, embedded_as=made).model_dump_json() if rows.num_rows else None
    except ShardDataError:
        if shard in index.finished_shards():
            return ShardResult.elsewhere(shard)
        raise
    docs_in = docs.num_rows if "docno" not in docs.column_names else len(pc.unique(docs.column("docno")))
    return ShardResult(shard=shard, info=info, docs=docs_in, chunks=rows.num_rows,  # copies of an id: one document
                       chunks_embedded=chunks_embedded, chunks_reused=chunks_reused, failures=failures,
                       seconds=time.perf_counter() - started if started else 0.0)
