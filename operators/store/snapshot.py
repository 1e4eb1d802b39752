"""One manifest generation as searches see it, and the exact merge of its shards' answers.

A ``Snapshot`` holds a generation's loaded shards and live rows, and builds what
searches derive from them once, on first use: the BM25 retrievers over the live
chunks, a mask per filter, the docno lookup. Each shard answers a query with its own
top ``k``; ``merge`` keeps the best ``k`` of them, score descending then docno, which
is the ranking one unsharded index gives. A ``Hits`` remembers its snapshot and where
each hit sits (shard, row), so ``take_rows`` reads the hits' doc-store rows by
position from the generation that was searched, even if a commit lands in between.
"""

from __future__ import annotations

import shlex
import threading
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pyarrow as pa

from operators.store import bm25, shard as shard_io
from operators.store.commits import merged_schema
from operators.store.errors import IndexCorruptError, IndexStoreError
from operators.store.settings import Manifest
from operators.tables import concat

#: What Arrow raises for a filter it cannot evaluate on a shard's rows (TypeError: ``where`` is no expression).
_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError)


def load(shards_dir, manifest: Manifest, loaded: dict, *, verify: bool) -> "Snapshot":
    """The snapshot of ``manifest``, loading (into ``loaded``, keyed by (id, token)) the shards not loaded yet.

    A damaged shard (a file missing, a sha256 mismatch, an unreadable file) is an ``IndexCorruptError``
    naming every damaged shard; ``damaged`` on it maps their ids to the problem, so the caller can tell
    whether a newer generation explains it (a shard superseded and removed meanwhile)."""
    shards, live, damaged = [], [], {}
    for info in manifest.shards:
        key = (info.id, info.token)
        if key not in loaded:
            folder = shards_dir / info.id
            problem = shard_io.damage(folder, info, checksums=verify)
            if problem is None:
                try:
                    loaded[key] = shard_io.Shard(folder, info, manifest.settings)
                except IndexCorruptError as err:
                    problem = str(err)
            if problem:  # go on: the error names every damaged shard
                damaged[info.id] = problem
                continue
        sh = loaded[key]
        shards.append(sh)
        live.append(shard_io.live_mask(manifest, info.id, len(sh)))
    if damaged:
        checks = shlex.join(["tessera", "index", "info", str(shards_dir.parent)])
        err = shard_io.damaged_error(shards_dir.parent, damaged, f"; `{checks}` checks every shard")
        err.damaged = damaged
        raise err
    return Snapshot(manifest=manifest, shards=shards, live=live)


@dataclass
class Hits:
    """One query's results, best first.

    ``shard``/``row`` locate each hit in the shards of the generation that was searched
    (``state``), so ``Index.documents_of`` reads their doc-store rows without looking
    docnos up again (and from the same snapshot, even if a commit lands in between)."""

    docnos: list[str]
    scores: np.ndarray
    shard: np.ndarray | None = None
    row: np.ndarray | None = None
    state: "Snapshot | None" = field(default=None, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.docnos)


@dataclass
class Snapshot:
    """What one manifest generation makes searchable (see the module docstring)."""

    manifest: Manifest
    shards: list[shard_io.Shard]
    live: list[np.ndarray]  # per shard: rows not tombstoned
    retrievers: list | None = None
    lookup: dict[str, tuple[int, int]] | None = None
    masks: dict[str, list[np.ndarray | None]] = field(default_factory=dict)
    unfiltered: list[np.ndarray | None] | None = None  # the rows a search without a filter may return
    schema: pa.Schema | None = None  # the doc-store columns of every shard, as their types merge
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def bm25_retrievers(self) -> list:
        """Per shard, its BM25 retriever over the live chunks (None where it has none)."""
        if self.retrievers is None:
            with self.lock:
                if self.retrievers is None:
                    self.retrievers = bm25.build_retrievers([s.terms for s in self.shards], self.live,
                                                            self.manifest.settings)
        return self.retrievers

    def allowed(self, where) -> list[np.ndarray | None]:
        """Per shard, rows a search may return (None: every row)."""
        if where is None:
            if self.unfiltered is None:
                self.unfiltered = [None if m.all() else m for m in self.live]
            return self.unfiltered
        key = str(where)
        with self.lock:
            if key not in self.masks:
                masks = [live & self._matches(sh, where) for sh, live in zip(self.shards, self.live)]
                self.masks = {key: masks} if len(self.masks) > 16 else {**self.masks, key: masks}
            return self.masks[key]

    def _matches(self, sh: shard_io.Shard, where) -> np.ndarray:
        """The rows of shard ``sh`` that match ``where``. A column of the index the shard has not (documents added
        later brought it) is null in each of its rows, which then match as a row with a null column does in a
        post-filter. Any other failure (bytes that are no UTF-8 where the filter reads text, a value the shard's
        type cannot compare) is an ``IndexStoreError`` (field ``where``) with the rows it failed on in ``rows``:
        silently matching nothing would drop the shard's rows from the results."""
        try:
            return sh.matches(where)
        except _ARROW_ERRORS as err:
            lacking = [f for f in self.docs_schema() if f.name not in sh.docs.schema.names]
            failed = err
        if lacking:
            try:
                return sh.matches(where, lacking)
            except _ARROW_ERRORS as err:
                failed = err
        conflict = self._values_conflict()
        if conflict is not None:  # the shard's values do not fit the column's merged type: no filter could help
            raise conflict from failed
        columns = sorted(self.docs_schema().names)
        reason = (str(failed).strip().splitlines() or [type(failed).__name__])[0]
        error = IndexStoreError(f"the filter cannot be evaluated on the doc store of shard {sh.info.id!r} "
                                f"({reason}); columns: {columns}", field="where")
        error.rows = sh.docs_with(lacking)  # Arrow's error, not its expression: the caller names the condition
        raise error from failed

    def _values_conflict(self):
        """The ``ColumnTypeConflictError`` of an index whose shards' live values do not fit the type their column
        merges to (a uint64 beyond 2**63-1 in one shard, int64 in another: committed before commits checked
        that), which makes a filter fail on that shard as much as reading rows of both; None when there is none."""
        from operators.store.commits import type_conflict_error

        shards = {sh.info.id: (sh, live) for sh, live in zip(self.shards, self.live) if live.any()}
        if not shards:
            return None
        return type_conflict_error(self.shards[0].folder.parent.parent,
                                   [(shard_id, sh.docs.schema) for shard_id, (sh, _) in shards.items()],
                                   lambda shard_id, name: shards[shard_id][0].docs.column(name).filter(
                                       pa.array(shards[shard_id][1])))

    def docs_schema(self) -> pa.Schema:
        """The doc-store columns of every shard, each with the type its shards merge to."""
        if self.schema is None:
            self.schema = merged_schema([sh.docs.schema for sh in self.shards])
        return self.schema

    def locate(self, docnos: Sequence[str]) -> list[tuple[int, int] | None]:
        """(shard, row) of each docno that is live in this generation; None for the others."""
        if self.lookup is None:
            with self.lock:
                if self.lookup is None:
                    lookup: dict[str, tuple[int, int]] = {}
                    for i, (sh, live) in enumerate(zip(self.shards, self.live)):
                        rows = np.nonzero(live)[0]
                        lookup.update(zip(sh.docnos[rows].tolist(), ((i, int(r)) for r in rows)))
                    self.lookup = lookup
        return [self.lookup.get(d) for d in docnos]

    def take_rows(self, shard: np.ndarray, rows: np.ndarray) -> pa.Table:
        """Doc-store rows ``rows`` of shards ``shard`` (parallel arrays), in that order."""
        if not len(rows):
            return self.shards[0].docs.slice(0, 0) if self.shards else pa.table({"docno": pa.array([], pa.string())})
        if len(self.shards) == 1 or (shard == shard[0]).all():  # one shard (the common case): one take
            return self.shards[int(shard[0])].docs.take(rows)
        parts, positions = [], []
        for i in np.unique(shard):
            picked = np.nonzero(shard == i)[0]
            parts.append(self.shards[i].docs.take(pa.array(rows[picked])))
            positions.append(picked)
        try:
            table = concat(parts)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as err:  # an index made before commits checked column types
            from operators.store.commits import type_conflict_error  # (or that their values fit the merged type)

            read = {self.shards[i].info.id: part for i, part in zip(np.unique(shard), parts)}
            raise type_conflict_error(self.shards[0].folder.parent.parent,
                                      [(shard_id, part.schema) for shard_id, part in read.items()],
                                      lambda shard_id, name: read[shard_id].column(name)) or err
        inverse = np.empty(len(rows), dtype=np.int64)
        inverse[np.concatenate(positions)] = np.arange(len(rows))
        return table.take(pa.array(inverse))

    def merge(self, found: list, n_queries: int, k: int) -> list[Hits]:
        """Exact top ``k`` per query from every shard's top ``k``; ties broken by docno.

        ``found`` holds ``(shard index, [(rows, scores) per query])`` per searched shard. Hits
        from one shard with strictly falling scores are already in this order and skip the
        sort on docno strings (most queries of a one-shard index)."""
        if not found:  # no shard was searched (none live, or none matches the filter)
            return [Hits([], np.zeros(0), np.zeros(0, np.int64), np.zeros(0, np.int64), self)
                    for _ in range(n_queries)]
        if len(found) == 1:
            i, results = found[0]
            docnos = self.shards[i].docnos
            return [self._top_k(np.full(len(rows), i), rows, scores, docnos[rows], k) for rows, scores in results]
        out = []
        for q in range(n_queries):
            parts = [(i, res[q][0], res[q][1]) for i, res in found]
            out.append(self._top_k(np.concatenate([np.full(len(rows), i) for i, rows, _ in parts]),
                                   np.concatenate([rows for _, rows, _ in parts]),
                                   np.concatenate([scores for _, _, scores in parts]),
                                   np.concatenate([self.shards[i].docnos[rows] for i, rows, _ in parts]), k))
        return out

    def _top_k(self, shard: np.ndarray, rows: np.ndarray, scores: np.ndarray, docnos: np.ndarray, k: int) -> Hits:
        """One query's top ``k`` of these candidates: score descending, then docno."""
        if len(scores) > 1 and not (scores[:-1] > scores[1:]).all():
            order = np.lexsort((docnos.astype(str), -scores))[:k]
            shard, rows, scores, docnos = shard[order], rows[order], scores[order], docnos[order]
        elif len(scores) > k:
            shard, rows, scores, docnos = shard[:k], rows[:k], scores[:k], docnos[:k]
        return Hits(docnos.tolist(), scores, shard, rows, self)
