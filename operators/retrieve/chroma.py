"""Dense retrieval from an embedded Chroma collection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from operators.retrieve._vector_stores import (
    CollectionNotFoundError,
    VectorStoreParams,
    VectorStoreRetriever,
    chroma_client,
)


def chroma_similarity(distances: np.ndarray, space: str) -> np.ndarray:
    """Chroma's distances as similarities (higher is better).

    ``cosine``: distance is 1 - cos, so similarity = cos = 1 - d. ``ip``: distance is
    1 - dot, so similarity = dot = 1 - d. ``l2``: distance is the squared Euclidean
    distance, so similarity = -d (for unit vectors -d = 2·cos - 2: same order as cosine).
    """
    distances = np.asarray(distances, dtype=np.float64)
    return -distances if space == "l2" else 1.0 - distances


class ChromaRetriever(VectorStoreRetriever):
    """Retrieve the top k documents per query from an embedded Chroma collection (PersistentClient).

    Queries are encoded with ``model`` (the encoder that embedded the collection; its
    dimension is checked against the collection's) and searched with Chroma's HNSW
    index; ``where`` is Chroma's metadata filter, passed through. Rows are
    ``qid, query, docno, title, text, <metadata fields>, score, rank`` like
    retrieve.corpus_bm25; ``score`` is a similarity converted from Chroma's distance
    by the collection's space (cosine/ip: 1 - distance, l2: -distance). The document
    text is Chroma's document, or the metadata field ``text_field`` when set. Load a
    collection with ``operators.retrieve._vector_stores.load_into_chroma``. Telemetry
    is off and no embedding function is attached: Chroma never downloads a model.

    Usage::

        ChromaRetriever({"path": "stores/chroma", "collection": "wiki", "k": 3})(
            pa.table({"qid": ["q1"], "query": ["which insects make honey"]}))
        # 3 rows for q1, the Bee article first
    """

    name = "retrieve.chroma"
    requires_packages = {"chromadb": "stores"}  # operators/extras.py

    class Params(VectorStoreParams):
        text_field: str | None = Field(None, description="Metadata field holding the text; "
                                       "None: the collection's documents.")

    def open_collection(self, folder: Path) -> int | None:
        client = chroma_client(folder)
        names = [c if isinstance(c, str) else c.name for c in client.list_collections()]
        if self.params.collection not in names:
            raise self.error(CollectionNotFoundError,
                             f"Chroma store {folder} has no collection '{self.params.collection}' "
                             f"(it has: {', '.join(sorted(names)) or 'none'})", "params.collection")
        self._collection = client.get_collection(self.params.collection, embedding_function=None)
        hnsw = (self._collection.configuration_json or {}).get("hnsw") or {}
        metadata = self._collection.metadata or {}
        self._space = hnsw.get("space") or metadata.get("hnsw:space") or "l2"
        first = self._collection.get(limit=1, include=["embeddings"])["embeddings"]
        return None if first is None or len(first) == 0 else int(np.asarray(first).shape[1])

    def search(self, vectors: np.ndarray, k: int) -> list[list[tuple[str, dict[str, Any], float]]]:
        count = self._collection.count()
        if count == 0:
            return [[] for _ in vectors]
        found = self._collection.query(query_embeddings=vectors, n_results=min(k, count), where=self.params.where,
                                       include=["documents", "metadatas", "distances"])
        hits = []
        for ids, docs, metas, dists in zip(found["ids"], found["documents"], found["metadatas"], found["distances"]):
            scores = chroma_similarity(dists, self._space)
            per_query = []
            for docno, doc, meta, score in zip(ids, docs, metas, scores):
                fields = dict(meta or {})
                fields["text"] = fields.pop(self.params.text_field, None) if self.params.text_field else doc
                per_query.append((docno, fields, float(score)))
            hits.append(per_query)
        return hits
