"""What one ingestion run did: the record ``tessera ingest`` prints (and writes with ``--json``) and
``flows.api.ingest`` returns."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


#: What ``tessera ingest`` and ``flows.api.ingest`` say of a run with ``nothing_to_do``.
NOTHING_TO_DO = "nothing to do: every shard of this source is in the index already"


@dataclass
class IngestReport:
    """What one ingestion run did."""

    index: str
    executor: str
    docs_total: int = 0          # documents the source holds (staged shards)
    docs: int = 0                # documents processed by this run (copies of an id once)
    chunks: int = 0              # chunks written by this run and still searchable (not those of a replaced copy)
    chunks_embedded: int = 0     # chunks this run sent to the encoder
    chunks_reused: int = 0       # chunks a sync took the index's vector of, their text unchanged (not encoded)
    shards_total: int = 0
    shards_written: int = 0
    shards_skipped: int = 0      # already in the manifest (at the start, or committed meanwhile by another ingest)
    shards_elsewhere: int = 0    # of those, committed by another ingest of the same source while this one ran
    failures: int = 0            # documents failed in this run
    open_failures: int = 0       # failures in the ledger still to retry, after this run
    resolved: int = 0            # failures a retry put into the index
    closed: int = 0              # failures of files no longer there, which a retry with sync closed
    docs_deleted: int = 0        # documents a sync deleted, which the source no longer has
    seconds: float = 0.0
    colbert_store: str | None = None  # precomputed ColBERT tokens built after ingestion (--colbert)

    @property
    def docs_per_s(self) -> float:
        return self.docs / self.seconds if self.seconds else 0.0

    @property
    def nothing_ingested(self) -> bool:
        """Every document of this run failed, reading it or later (chunking, embedding: read, counted in ``docs``,
        no chunk written): not a success."""
        return self.failures > 0 and (self.docs == 0 or self.chunks == 0)

    @property
    def nothing_to_do(self) -> bool:
        """The source's every shard was in the index already, and nothing was deleted: a rerun of a finished
        ingestion (``NOTHING_TO_DO``)."""
        return bool(self.shards_total) and self.shards_skipped == self.shards_total and not self.docs_deleted

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "docs_per_s": round(self.docs_per_s, 1)}
