"""What retrieve.chroma and retrieve.qdrant share: params, query encoding, result rows, loaders.

Both operators read queries (``qid, query`` + other columns), encode each query once
with a sentence-transformers model (the one that embedded the collection), ask the
store for the top ``k`` and write one row per hit like retrieve.corpus_bm25:
``qid, query, ..., docno, title, text, <metadata fields>, score, rank`` plus the
step's ``score_<step>``/``rank_<step>``. ``score`` is a similarity, higher is better.

Populate a store from a Tessera document table (``docno, text`` + ``title``, other
metadata columns, and a ``vector`` column from embed.sentence_transformer)::

    from operators.retrieve._vector_stores import load_into_chroma, load_into_qdrant
    docs = create("embed", {"title_column": "title"})(documents)
    load_into_chroma(docs, "stores/chroma", "wiki")       # cosine space
    load_into_qdrant(docs, "stores/qdrant", "wiki")       # cosine distance

Both stores run embedded (no server): Chroma's ``PersistentClient(path)`` and
Qdrant's local mode ``QdrantClient(path=...)``. Qdrant's local mode locks its folder
to one client, so this module keeps one client per folder per process and shares it.
"""

from __future__ import annotations

import atexit
import threading
import uuid
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.errors import OperatorError, TesseraError
from operators.local_files import local_path
from operators.models import DEFAULT_ENCODER
from operators.tables import query_rows, ranking_columns, set_ranking

INSTALL = "pip install tessera[stores]"
#: Document columns that are not metadata when loading a table into a store.
_DOC_COLUMNS = ("docno", "title", "text", "vector")


class StoreNotInstalledError(TesseraError):
    """The client library of a vector store is not installed."""


class CollectionNotFoundError(OperatorError):
    """The store folder or the collection a retriever names does not exist."""


class DimensionMismatchError(OperatorError):
    """The query encoder's vectors and the collection's vectors differ in dimension."""


def import_chromadb():
    try:
        import chromadb
        from chromadb.config import Settings
    except ImportError:
        raise StoreNotInstalledError(f"Chroma is not installed: {INSTALL}") from None
    return chromadb, Settings


def import_qdrant():
    try:
        import qdrant_client
        from qdrant_client import models
    except ImportError:
        raise StoreNotInstalledError(f"qdrant-client is not installed: {INSTALL}") from None
    return qdrant_client, models


def chroma_client(path: str | Path):
    """An embedded Chroma client on ``path`` with telemetry off (one settings object everywhere:
    Chroma refuses two clients of one folder with different settings in a process)."""
    chromadb, Settings = import_chromadb()
    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


_qdrant_clients: dict[str, Any] = {}
_qdrant_lock = threading.Lock()


def qdrant_client(path: str | Path):
    """The process's Qdrant local-mode client on ``path`` (local mode allows one per folder)."""
    qdrant, _ = import_qdrant()
    key = str(Path(path).expanduser().resolve())
    with _qdrant_lock:
        if key not in _qdrant_clients:
            if not _qdrant_clients:
                atexit.register(_close_qdrant_clients)
            _qdrant_clients[key] = qdrant.QdrantClient(path=key)
        return _qdrant_clients[key]


def _close_qdrant_clients() -> None:
    """Close the clients while the interpreter still works (their ``__del__`` at shutdown prints
    "ImportError: sys.meta_path is None" tracebacks)."""
    with _qdrant_lock:
        for client in _qdrant_clients.values():
            client.close()
        _qdrant_clients.clear()


def qdrant_point_id(docno: str) -> str:
    """Qdrant ids are integers or UUIDs: a docno maps to a stable UUID (the docno stays in the payload)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"tessera:{docno}"))


# -- loading a document table into a store ---------------------------------------

def _documents(table: pa.Table, vector_column: str) -> tuple[list[str], np.ndarray, list[dict[str, Any]]]:
    """(docnos, vectors, payload dicts with title/text/metadata, nulls dropped) of a document table."""
    from operators.embed.sentence_transformer import arrow_to_vectors

    missing = [c for c in ("docno", vector_column) if c not in table.column_names]
    if missing:
        raise TesseraError(f"document table lacks column(s) {missing}; it has {table.column_names} "
                           "(embed it with embed.sentence_transformer first)")
    vectors = arrow_to_vectors(table.column(vector_column))
    rest = table.drop_columns(["docno", vector_column])
    payloads = [{k: v for k, v in row.items() if v is not None} for row in rest.to_pylist()]
    return [str(d) for d in table.column("docno").to_pylist()], vectors, payloads


def load_into_chroma(table: pa.Table, path: str | Path, collection: str, *,
                     space: Literal["cosine", "ip", "l2"] = "cosine", vector_column: str = "vector",
                     batch_size: int = 1000) -> int:
    """Upsert a document table into a Chroma collection (created with ``space`` if absent).

    ``docno`` becomes the id, ``text`` the document, every other column except the
    vector (``title`` included) a metadata field. Returns the collection's count.
    """
    docnos, vectors, payloads = _documents(table, vector_column)
    target = chroma_client(path).get_or_create_collection(
        collection, configuration={"hnsw": {"space": space}}, embedding_function=None)
    for lo in range(0, len(docnos), batch_size):
        part = payloads[lo:lo + batch_size]
        metadatas = [{k: v for k, v in p.items() if k != "text"} or None for p in part]
        target.upsert(ids=docnos[lo:lo + batch_size], embeddings=vectors[lo:lo + batch_size],
                      documents=[p.get("text", "") for p in part], metadatas=metadatas)
    return target.count()


def load_into_qdrant(table: pa.Table, path: str | Path, collection: str, *,
                     distance: Literal["cosine", "dot", "euclid"] = "cosine", vector_column: str = "vector",
                     batch_size: int = 1000) -> int:
    """Upsert a document table into a Qdrant local-mode collection (created with ``distance`` if absent).

    Each row becomes a point whose id is ``qdrant_point_id(docno)`` and whose payload
    holds ``docno`` and every other column except the vector. Returns the point count.
    """
    _, models = import_qdrant()
    docnos, vectors, payloads = _documents(table, vector_column)
    client = qdrant_client(path)
    if not client.collection_exists(collection):
        metric = {"cosine": models.Distance.COSINE, "dot": models.Distance.DOT,
                  "euclid": models.Distance.EUCLID}[distance]
        client.create_collection(collection, vectors_config=models.VectorParams(size=vectors.shape[1],
                                                                                distance=metric))
    for lo in range(0, len(docnos), batch_size):
        client.upsert(collection, points=[
            models.PointStruct(id=qdrant_point_id(d), vector=v.tolist(), payload={"docno": d, **p})
            for d, v, p in zip(docnos[lo:lo + batch_size], vectors[lo:lo + batch_size], payloads[lo:lo + batch_size])
        ])
    return client.count(collection, exact=True).count


# -- the retriever base ------------------------------------------------------------

class VectorStoreParams(BaseModel):
    """Params both vector-store retrievers take."""

    model_config = ConfigDict(extra="forbid")
    path: str = Field(..., min_length=1, json_schema_extra=local_path(),
                      description="Folder of the embedded store (Chroma persistent directory / Qdrant local-mode "
                      "path).")
    collection: str = Field(..., min_length=1, description="Collection to search.")
    k: int = Field(10, gt=0, le=10_000, description="Documents returned per query (at most).")
    model: str = Field(DEFAULT_ENCODER, min_length=1, description="Query encoder: packaged model name or model "
                       "folder; must be the model that embedded the collection (the dimension is checked).")
    backend: Literal["torch", "onnx", "onnx-int8"] = Field("torch", description="Query encoder backend.")
    normalize: bool = Field(True, description="L2-normalise query vectors (as embed.sentence_transformer does).")
    where: dict[str, Any] | None = Field(None, description="Metadata filter in the store's own format, passed "
                                         "through unchanged (a Chroma `where` dict / a Qdrant `Filter` as a dict).")
    title_field: str = Field("title", min_length=1, description="Metadata/payload field holding the title.")


class VectorStoreRetriever(Operator):
    """Base of retrievers over an external vector store; subclasses open the store and search it."""

    scope = "query"
    # The store lives outside the flow and may change between runs: never reuse cached results.
    cacheable = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._encoder = None

    def reads(self) -> list[str]:
        return ["qid", "query"]

    def produces(self) -> dict[str, str]:
        return {"docno": "id", "title": "data", "text": "text", **ranking_columns(self.step_id)}

    def error(self, cls: type[OperatorError], message: str, field: str | None = None) -> OperatorError:
        return cls(message, op=self.name, step=self.step_id, field=field)

    def required_models(self) -> dict[str, str]:
        return {"params.model": self.params.model}

    # -- lifecycle ------------------------------------------------------------

    def setup(self) -> None:
        if self._encoder is not None:
            return
        folder = Path(self.params.path).expanduser()
        if not folder.is_dir():  # both clients would create an empty store for a mistyped path
            raise self.error(CollectionNotFoundError, f"no store at {folder}: the folder does not exist",
                             "params.path")
        dim = self.open_collection(folder)
        from operators.models import load_sentence_transformer

        encoder = load_sentence_transformer(self.params.model, backend=self.params.backend)
        model_dim = int(encoder.get_embedding_dimension())
        if dim is not None and dim != model_dim:
            raise self.error(DimensionMismatchError,
                             f"collection '{self.params.collection}' holds {dim}-d vectors but model "
                             f"'{self.params.model}' encodes {model_dim}-d: query with the model that embedded "
                             "the collection", "params.model")
        self._encoder = encoder

    def open_collection(self, folder: Path) -> int | None:
        """Open the client and collection; return the collection's vector dimension (None if empty)."""
        raise NotImplementedError

    def search(self, vectors: np.ndarray, k: int) -> list[list[tuple[str, dict[str, Any], float]]]:
        """Per query vector, hits as (docno, fields, similarity) with fields holding text/title/metadata."""
        raise NotImplementedError

    # -- running --------------------------------------------------------------

    def transform(self, table: pa.Table) -> pa.Table:
        owned = set(self.produces())  # input columns of the same names are replaced
        queries = query_rows(table, owned)
        hits: list[list[tuple[str, dict[str, Any], float]]] = []
        if queries.num_rows:
            texts = [q or "" for q in queries.column("query").to_pylist()]
            vectors = self._encoder.encode(texts, normalize_embeddings=self.params.normalize,
                                           convert_to_numpy=True, show_progress_bar=False)
            hits = self.search(np.asarray(vectors, dtype=np.float32), self.params.k)
        rows = [i for i, found in enumerate(hits) for _ in found]
        flat = [hit for found in hits for hit in found]
        out = queries.take(pa.array(rows, pa.int64()))
        title_field = self.params.title_field
        columns: dict[str, list[Any]] = {
            "docno": [docno for docno, _, _ in flat],
            "title": [fields.get(title_field) for _, fields, _ in flat],
            "text": [fields.get("text") for _, fields, _ in flat],
        }
        reserved = set(out.column_names) | owned | {title_field}
        extra = [key for key in dict.fromkeys(k for _, fields, _ in flat for k in fields) if key not in reserved]
        columns.update({key: [fields.get(key) for _, fields, _ in flat] for key in extra})
        for name, values in columns.items():
            typ = pa.string() if name in ("docno", "title", "text") else None
            out = out.append_column(name, pa.array(values, typ))
        return set_ranking(out, pa.array([score for _, _, score in flat], pa.float64()), self.step_id)
