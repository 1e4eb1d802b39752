"""How an ``Index`` is read: each search and doc-store read sees one generation (a ``Snapshot``, loaded once and
kept while the manifest holds), retried once on a newer manifest when a compaction removed a shard meanwhile
(``_newest``). Apart from ``index`` so that the writing side (shards, commits, compaction) reads alone; ``Index``
inherits ``IndexReads``, which uses the state ``Index.__init__`` sets (its lock, manifest, loaded shards, pool)."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from operators.store import search, shard as shard_io, snapshot
from operators.store.errors import IndexCorruptError
from operators.store.layout import SHARDS
from operators.store.settings import Manifest
from operators.store.snapshot import Hits, Snapshot
from operators.tables import concat, select_or_null


class IndexReads:
    """The reading half of ``Index`` (see the module docstring)."""

    def _current(self) -> Snapshot:
        return self._newest(self._snapshot)

    def _snapshot(self, manifest: Manifest) -> Snapshot:
        with self._lock:
            if self._state is not None and self._state.manifest.same_version(manifest):
                return self._state
            state = snapshot.load(self.path / SHARDS, manifest, self._loaded, verify=self.verify)
            current = {(s.id, s.token) for s in manifest.shards}
            self._loaded = {k: v for k, v in self._loaded.items() if k in current}
            self._state = state
            return state

    def _newest(self, read):
        """``read(manifest)`` of the newest manifest. A shard file that cannot be read is retried once on the
        manifest as it is now when that is a newer generation: the reader read the manifest just before a
        compaction committed, and the superseded shard was removed. Otherwise the ``IndexCorruptError`` stands."""
        self.refresh()
        manifest = self._manifest
        try:
            return read(manifest)
        except IndexCorruptError:
            with self._lock:
                self._stat = None  # re-read it even if its stat looks unchanged
            self.refresh()
            if self._manifest.same_version(manifest):
                raise
            return read(self._manifest)

    def search_bm25(self, queries: Sequence[str], k: int, where=None) -> list[Hits]:
        """BM25 top ``k`` per query over live chunks (matching ``where``), exact across shards."""
        return search.bm25_hits(self.path, self.settings, self._current, queries, k, where, self._pool)

    def search_dense(self, vectors: np.ndarray, k: int, where=None) -> list[Hits]:
        """Inner-product top ``k`` per query vector over live chunks (matching ``where``)."""
        return search.dense_hits(self.path, self.settings, self._current, vectors, k, where, self._pool)

    def documents(self, docnos: Sequence[str]) -> pa.Table:
        """Doc-store rows of live chunks ``docnos``, in the given order."""
        return search.documents(self.path, self._current(), docnos)

    def column_names(self) -> list[str]:
        """Every doc-store column of the live shards, in the order they first appear (a shard may lack some)."""
        return self._newest(lambda manifest: shard_io.doc_column_names(self.path / SHARDS, manifest, self._loaded))

    def docs_schema(self) -> pa.Schema | None:
        """The doc-store columns of every live shard, each with the type its shards merge to (documents added later
        may bring metadata columns the first shard lacks), from the shards a search loads anyway; None for an index
        without shards (no documents yet: nothing a filter could keep)."""
        state = self._current()
        return state.docs_schema() if state.shards else None

    def columns(self, names: Sequence[str]) -> tuple[int, pa.Table]:
        """The doc-store columns ``names`` of every live chunk, with the generation they were read from (null
        where a shard has no such column: documents added later may carry metadata that earlier ones lack);
        the doc stores alone are read (``shard.live_docs``), not the search structures."""
        manifest, docs = self._newest(lambda m: (m, shard_io.live_docs(self.path / SHARDS, m, names, self._loaded)))
        return manifest.generation, concat([select_or_null(d, names) for d in docs]) if docs else \
            pa.table({n: pa.array([], pa.string()) for n in names})

    def passages_of(self, doc_id: str, names: Sequence[str]) -> list[dict[str, Any]]:
        """The doc-store rows (columns ``names``) of the live passages of document ``doc_id``; its shard alone is
        read whole (``shard.live_docs_of``)."""
        parts = self._newest(lambda m: shard_io.live_docs_of(self.path / SHARDS, m, doc_id, names, self._loaded))
        return [row for part in parts for row in part.to_pylist()]

    def documents_of(self, hits: Sequence[Hits]) -> pa.Table:
        """Doc-store rows of every hit of ``hits``, in order: ``documents`` of their docnos, read
        by position from the generation each search saw (hits of other origins: by docno)."""
        return search.documents_of(hits, self.documents)
