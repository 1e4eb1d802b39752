"""What ``retrieve.bm25`` and ``retrieve.dense`` share: the index, the filter, the output rows.

Indices are opened once per process and shared by every operator instance (and Ray
actor thread) that names the same path: ``shared_index`` keeps one ``Index`` per
resolved path. An ``Index`` loads its shards lazily, once, and notices a newer
manifest (another ingestion committed) by its file stat, so a long-lived process
searches the newest generation without rebuilding anything per query.

An index deleted (its folder removed: ``DELETE /v1/indices/{name}``) must not stay loaded in
every process that once searched it, nor answer for an index made again under its name: on
each call ``shared_index`` stats the manifest (the ``Index``'s own check), drops an entry whose
manifest is gone, and opens anew one whose manifest has another creation time (a new index
there, not a newer generation of the same); every ``SWEEP_EVERY_S`` it also stats the other
cached manifests and drops those that are gone, so an index deleted and never named again is
let go too, and only the ``KEPT_INDICES`` searched last stay open. The retrievers hold no ``Index`` of their own:
they ask ``shared_index`` on each use, so a dropped one is freed once a search that runs on
it ends. ``forget_index`` drops an entry at once (the process that deleted it).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.errors import OperatorError
from operators.filters import FilterError, MetadataFilter, apply_filter, evaluation_error
from operators.metadata_columns import RANKING_PREFIXES
from operators.tables import query_rows, ranking_columns, set_ranking

_lock = threading.Lock()
#: resolved path -> (the Index, its manifest's creation time when it was opened), the one searched last at the end
_indices: "OrderedDict[str, tuple[Any, float]]" = OrderedDict()
#: How many indices a process keeps open between searches (each holds its shards' BM25 and vectors in memory): a
#: program or service that searched many indices kept every one loaded for good; one let go is opened again when
#: a search names it.
KEPT_INDICES = 32
#: Seconds between two looks (a stat per cached index) for cached indices whose manifest is gone.
SWEEP_EVERY_S = 30.0
#: The query's columns a result row keeps from its query even where the index has a metadata column of that name
#: (a corpus whose documents carry a ``qid``): they say which query the row answers.
QUERY_COLUMNS = ("qid", "query")
#: The columns the query rewriting steps write on each query (``query.expand``, ``query.decompose``,
#: ``query.keywords``, ``query.contextualize``): where the queries have one, a hit keeps the query's, not a document's
#: metadata column of that name (a document's ``original_qid: "x"`` sent its hits to a query x, which
#: ``fuse.expanded_queries`` has none of: bm25_expanded found nothing). Without one, the document's is kept.
REWRITE_COLUMNS = ("original_qid", "original_query", "query_source", "extra_queries")
_swept = time.monotonic()
#: The most results per query a retriever returns (``k``).
MAX_K = 10_000


def shared_index(path: Path):
    """The process-wide ``Index`` at ``path`` (opened on first use; it follows newer manifests itself; an
    ``IndexNotFoundError`` once the index is deleted, a fresh ``Index`` once another was made there)."""
    from operators.store import Index, IndexNotFoundError

    key = str(path.resolve())
    _sweep(key)
    with _lock:
        entry = _indices.get(key)
        if entry is not None:
            _indices.move_to_end(key)
    if entry is not None:
        index, created = entry
        try:
            changed = index.refresh()  # one stat; the manifest is read only when it was replaced
        except IndexNotFoundError:
            forget_index(key, index)
            raise
        if not changed or index.manifest.created_at == created:
            return index
        forget_index(key, index)  # deleted and made again: another index, whose shards the old one never had
    with _lock:
        entry = _indices.get(key)
        if entry is None:
            index = Index.open(key)
            entry = _indices[key] = (index, index.manifest.created_at)
            while len(_indices) > KEPT_INDICES:
                _indices.popitem(last=False)
        return entry[0]


def _sweep(asked: str) -> None:
    """Drop the cached indices other than ``asked`` whose manifest is gone, every ``SWEEP_EVERY_S``."""
    global _swept
    now = time.monotonic()
    with _lock:
        if now - _swept < SWEEP_EVERY_S:
            return
        _swept = now
        cached = [(key, entry[0]) for key, entry in _indices.items() if key != asked]
    for key, index in cached:
        if not os.path.exists(os.path.join(key, "manifest.json")):
            forget_index(key, index)


def forget_index(path: str | Path, index: Any = None) -> bool:
    """Drop the cached ``Index`` at ``path`` (only if it is ``index``, when given); whether one was dropped."""
    key = str(Path(path).resolve())
    with _lock:
        entry = _indices.get(key)
        if entry is None or (index is not None and entry[0] is not index):
            return False
        del _indices[key]
        return True


def _with_filter_columns(docs: pa.Table, columns: set[str], schema: pa.Schema) -> pa.Table:
    """``docs`` with a null column for each filter column its rows lack (hits only from shards older than the
    column): the filter must reject those rows, not fail on the missing field."""
    for name in sorted(columns - set(docs.column_names)):
        docs = docs.append_column(schema.field(name), pa.nulls(docs.num_rows, schema.field(name).type))
    return docs


#: A hit's document columns, in this order, in every search's rows, whatever its documents hold, and the value of one
#: that a passage lacks: no title is "" (never null: ``hit["title"][:20]``), and a passage stored without its place
#: in a document (``tessera index add`` before 2026-12-07, ``tessera ingest --no-chunk``) is a whole one, 0 of 1.
PASSAGE_COLUMNS = {"docno": None, "title": "", "text": "", "doc_id": None, "chunk_index": 0, "total_chunks": 1}
_PASSAGE_TYPES = {"chunk_index": pa.int32(), "total_chunks": pa.int32()}


def _with_passage_columns(columns: dict, kept: list[str], n: int) -> dict:
    """``columns`` (the query's ``kept`` ones first) with every one of ``PASSAGE_COLUMNS``, in its order after the
    query's, their nulls filled: an index whose shards hold other columns (an added document's have no title
    where none of its file's records had one, nor chunk numbers) gave rows of other columns, and null titles."""
    out = {name: columns[name] for name in kept}
    for name, missing in PASSAGE_COLUMNS.items():
        column = columns.get(name)
        if column is None:
            column = pa.nulls(n, _PASSAGE_TYPES.get(name, pa.string()))
        if missing is not None and column.null_count:
            column = pc.fill_null(column, missing)
        out[name] = column
    out.update((name, column) for name, column in columns.items() if name not in out)
    return out


class RetrieverParams(BaseModel):
    """Params every index retriever takes."""

    model_config = ConfigDict(extra="forbid")

    index: str | None = Field(None, title="Index", description="Name (under $TESSERA_HOME/indices) or path of an "
                              "index built by tessera ingest; the benchmarker fills it in for built-in flows.")
    k: int = Field(10, gt=0, le=MAX_K, title="Results per query", description="Chunks returned per query (at most).",
                   examples=[10, 100, 1000])
    filter: MetadataFilter | None = Field(None, description="Metadata filter over doc-store columns (equality, "
                                          "in, ranges, year/month/date ranges, country/region, all/any/not).")
    filter_mode: Literal["pre", "post"] = Field(
        "pre", description="pre: search only the chunks that match the filter (k results even when matches are "
        "rare); post: retrieve k * expand_factor, then keep the matching top k.")
    expand_factor: int = Field(4, ge=1, le=1000, description="post filtering: how many times k to retrieve "
                               "before filtering.")


#: What an index built without a feature lacks, the ``tessera ingest`` option that leaves it out, and the
#: retriever that searches such an index instead.
_FEATURES = {"dense": ("vectors", "--no-dense", "retrieve.bm25"),
             "bm25": ("BM25 statistics", "--no-bm25", "retrieve.dense")}


def missing_feature(op: Operator, index_name: str, settings: Any) -> OperatorError | None:
    """The error of ``op`` searching an index whose ``settings`` lack what it needs (``op.index_needs()``: vectors,
    BM25 statistics), or None. Both the retriever's own check and the check before a flow runs
    (``flows.model_check.check_index_features``) say it in these words."""
    for feature in op.index_needs():
        if feature in _FEATURES and not getattr(settings, feature, True):
            what, option, other = _FEATURES[feature]
            return OperatorError(f"index '{index_name}' was built without {what} ({option} of tessera ingest or "
                                 f"tessera index add; settings={{'{feature}': False}} in Python); search it with "
                                 f"{other}, or build it again without {option}", op=op.name, step=op.step_id,
                                 field="params.index")
    return None


class IndexRetriever(Operator):
    """Base of the index retrievers (not registered: it has no name)."""

    scope = "query"
    #: Queries per call: a few calls per 1,000 queries, so the Ray executor can spread a query set over its CPUs.
    batch_size = 256
    Params: ClassVar[type[BaseModel]] = RetrieverParams
    #: What an index built for this step must hold ("bm25", "dense"); read by FlowSpec.index_features.
    index_features: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._path: Path | None = None
        self._checked: Any = None  # a weak reference to the Index ``check_index`` passed last

    def __getstate__(self) -> dict[str, Any]:  # a weak reference does not pickle: the copy checks again
        return {**self.__dict__, "_checked": None}

    # -- declared columns ---------------------------------------------------------

    def reads(self) -> list[str]:
        return ["qid", "query"]

    def produces(self) -> dict[str, str]:
        return {"docno": "id", "doc_id": "id", "title": "data", "text": "text", **ranking_columns(self.step_id)}

    def cache_identity(self) -> dict[str, Any]:
        identity = super().cache_identity()
        identity["index"] = self.index_identity()
        return identity

    def index_identity(self) -> dict[str, Any] | None:
        """Manifest generation, creation and last commit time: a changed index is a new cache key. A folder copied
        back (a backup restored) keeps its generation and creation time, and then commits the same generation as
        another history did: the commit time tells them apart; and its shards' write tokens (random, one per shard
        written). Not its path: an index copied, moved or renamed (a ``$TESSERA_HOME`` moved whole) holds the same
        rows, and its cached searches missed every one; two folders alike in all of these are copies of one index.
        An index that cannot be read is keyed by its path."""
        if not self.params.index:
            return None
        from operators.store import IndexStoreError, resolve_index

        path = resolve_index(self.params.index)
        try:
            manifest = shared_index(path).manifest
        except IndexStoreError:
            return {"path": str(path), "generation": None}
        import hashlib

        shards = hashlib.sha256(" ".join(f"{s.id}:{s.token}" for s in manifest.shards).encode()).hexdigest()[:16]
        return {"generation": manifest.generation, "created_at": manifest.created_at, "updated_at": manifest.updated_at,
                "shards": shards}

    # -- lifecycle ----------------------------------------------------------------

    def setup(self) -> None:
        if self._path is not None:
            return
        if not self.params.index:
            raise OperatorError("params.index is not set (name or path of an index built by tessera ingest)",
                                op=self.name, step=self.step_id, field="params.index")
        from operators.store import resolve_index

        path = resolve_index(self.params.index)
        self._checked_index(path)
        self._path = path

    def _checked_index(self, path: Path):
        """``shared_index(path)``, checked by ``check_index`` whenever it is another ``Index`` than last time (the
        index was deleted and made again, maybe with other settings); an ``OperatorError`` naming params.index when
        it does not open."""
        from operators.store import IndexStoreError

        try:
            index = shared_index(path)
        except IndexStoreError as err:
            raise OperatorError(f"cannot open index '{self.params.index}' ({path}): {err.message}",
                                op=self.name, step=self.step_id, field="params.index") from err
        if self._checked is None or self._checked() is not index:
            self.check_index(index)
            self._checked = weakref.ref(index)
        return index

    def check_index(self, index) -> None:
        """Raise when the index cannot serve this retriever (no BM25 statistics, no vectors)."""
        if (error := missing_feature(self, self.params.index, index.settings)) is not None:
            raise error

    @property
    def index(self):
        """The index, as ``shared_index`` has it now (held by no operator: a deleted one is freed)."""
        self.ensure_setup()
        return self._checked_index(self._path)

    # -- searching ----------------------------------------------------------------

    def search(self, texts: list[str], k: int, where) -> list:
        """``Hits`` per query text, best first."""
        raise NotImplementedError

    def _where(self, schema: pa.Schema | None):
        flt: MetadataFilter | None = self.params.filter
        if flt is None:
            return None
        try:
            return flt.to_expression(schema)
        except FilterError as err:
            raise FilterError(err.message, op=self.name, step=self.step_id, field=err.field) from None

    def _unevaluable(self, err, schema: pa.Schema) -> FilterError:
        """The error for a pre-filter that a shard could not evaluate (``err``, the store's, with that shard's rows):
        the failing condition named as written (``evaluation_error``), compiled for the index's ``schema`` as the
        search compiled it."""
        return evaluation_error(self.params.filter, getattr(err, "rows", None), err.__cause__ or err,
                                step=self.step_id, op=self.name, schema=schema)

    def transform(self, table: pa.Table) -> pa.Table:
        queries = query_rows(table)
        texts = [q or "" for q in queries.column("query").to_pylist()]
        schema = self.index.docs_schema() if self.params.filter is not None else None
        if self.params.filter is not None and schema is None:
            texts = []  # an index without documents: no hits, as without the filter (searching now could find a
            # shard committed meanwhile, and return its rows unfiltered)
        where = self._where(schema) if schema is not None else None
        k = self.params.k
        post = where is not None and self.params.filter_mode == "post"
        try:
            hits = self.search(texts, k * self.params.expand_factor if post else k, None if post else where) \
                if texts else []
            docs = self.index.documents_of(hits)
        except Exception as err:
            from operators.store import IndexStoreError  # here, not per call: the store imports scipy

            if not isinstance(err, IndexStoreError):
                raise
            if err.field == "where":  # the filter fails on a shard (Arrow cannot evaluate it on its rows)
                raise self._unevaluable(err, schema) from None
            # chained (not ``from None``): the service answers an index deleted mid-search with a 404 by its cause
            raise OperatorError(err.message, op=self.name, step=self.step_id, field="params.index") from err
        rows = np.repeat(np.arange(len(hits), dtype=np.int64), [len(h) for h in hits])
        scores = np.concatenate([h.scores for h in hits], dtype=np.float64) if hits else np.zeros(0)
        if post:  # keep the matching rows, then the top k of each query
            matching = apply_filter(_with_filter_columns(docs, self.params.filter.columns(schema), schema)
                                    .append_column("__i", pa.array(np.arange(docs.num_rows))), self.params.filter,
                                    where, step=self.step_id, op=self.name)
            keep = matching.column("__i").to_numpy()
            rows, scores, docs = rows[keep], scores[keep], docs.take(pa.array(keep, pa.int64()))
            start = np.r_[0, np.nonzero(np.diff(rows))[0] + 1]
            position = np.arange(len(rows)) - np.repeat(start, np.diff(np.r_[start, len(rows)])) \
                if len(rows) else np.zeros(0, np.int64)
            top = np.nonzero(position < k)[0]
            rows, scores, docs = rows[top], scores[top], docs.take(pa.array(top, pa.int64()))
        # A document's own qid is no query's, and its score_x or rank_x no ranking of this search: an index written
        # before uploads and ingestion left such fields out (``"score_bm25": 5``, ``"score_card": "gold"``, of types
        # the data model gives no such column) failed every search with a 500. A filter still reads them.
        doc_columns = [c for c in docs.column_names if c not in QUERY_COLUMNS and not c.startswith(RANKING_PREFIXES)
                       and not (c in REWRITE_COLUMNS and c in queries.column_names)]
        owned = set(doc_columns).union(self.produces())  # replaced where the input has them
        kept = [c for c in queries.column_names if c not in owned]
        columns = dict(zip(kept, queries.select(kept).take(rows).columns))
        columns.update(zip(doc_columns, docs.select(doc_columns).columns))
        columns = _with_passage_columns(columns, kept, len(rows))
        # Hits come merged best first per query, ties by docno: already in ranking order.
        return set_ranking(columns, pa.array(scores, pa.float64()), self.step_id, groups=rows, ordered=True)
