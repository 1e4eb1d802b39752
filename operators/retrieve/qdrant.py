"""Dense retrieval from a Qdrant collection in local mode."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from operators.errors import ParamsError
from operators.retrieve._vector_stores import (
    CollectionNotFoundError,
    VectorStoreParams,
    VectorStoreRetriever,
    import_qdrant,
    qdrant_client,
)


class QdrantRetriever(VectorStoreRetriever):
    """Retrieve the top k documents per query from a Qdrant collection in local mode (QdrantClient(path=...)).

    Queries are encoded with ``model`` (the encoder that embedded the collection; its
    dimension is checked against the collection's) and searched exactly (local mode
    scans every vector); ``where`` is a Qdrant ``Filter`` written as a dict (``{"must":
    [{"key": "lang", "match": {"value": "en"}}]}``), passed through. Rows are ``qid,
    query, docno, title, text, <payload fields>, score, rank`` like
    retrieve.corpus_bm25. ``score`` is Qdrant's score for cosine and dot (a
    similarity) and minus the distance for euclid and manhattan, so higher is always
    better. ``docno`` is the payload's ``docno_field`` (else the point id). Load a
    collection with ``operators.retrieve._vector_stores.load_into_qdrant``. Local mode
    locks its folder: one client per folder per process is shared by every instance.

    Usage::

        QdrantRetriever({"path": "stores/qdrant", "collection": "wiki", "k": 3})(
            pa.table({"qid": ["q1"], "query": ["which insects make honey"]}))
        # 3 rows for q1, the Bee article first
    """

    name = "retrieve.qdrant"
    requires_packages = {"qdrant_client": "stores"}  # operators/extras.py
    # Local mode locks the folder to one process: a second Ray actor could not open it.
    concurrency = 1

    class Params(VectorStoreParams):
        text_field: str = Field("text", min_length=1, description="Payload field holding the text.")
        docno_field: str = Field("docno", min_length=1, description="Payload field holding the docno.")
        vector_name: str | None = Field(None, description="Named vector to search (collections with several); "
                                        "None: the collection's only vector.")

    def open_collection(self, folder: Path) -> int | None:
        _, models = import_qdrant()
        if self.params.where is not None:
            try:
                self._filter = models.Filter.model_validate(self.params.where)
            except Exception as err:
                raise ParamsError(f"not a Qdrant filter: {err}".splitlines()[0], op=self.name, step=self.step_id,
                                  field="params.where") from None
        else:
            self._filter = None
        client = qdrant_client(folder)
        if not client.collection_exists(self.params.collection):
            names = [c.name for c in client.get_collections().collections]
            raise self.error(CollectionNotFoundError,
                             f"Qdrant store {folder} has no collection '{self.params.collection}' "
                             f"(it has: {', '.join(sorted(names)) or 'none'})", "params.collection")
        self._client = client
        vectors = client.get_collection(self.params.collection).config.params.vectors
        if isinstance(vectors, dict):
            if self.params.vector_name not in vectors:
                raise self.error(CollectionNotFoundError,
                                 f"collection '{self.params.collection}' has named vectors {sorted(vectors)}: "
                                 f"set vector_name (got {self.params.vector_name!r})", "params.vector_name")
            vectors = vectors[self.params.vector_name]
        distance = str(getattr(vectors.distance, "value", vectors.distance)).lower()
        self._sign = -1.0 if distance in ("euclid", "manhattan") else 1.0
        return int(vectors.size)

    def search(self, vectors: np.ndarray, k: int) -> list[list[tuple[str, dict[str, Any], float]]]:
        _, models = import_qdrant()
        requests = [models.QueryRequest(query=v.tolist(), using=self.params.vector_name, filter=self._filter,
                                        limit=k, with_payload=True) for v in vectors]
        responses = self._client.query_batch_points(self.params.collection, requests=requests) if requests else []
        hits = []
        for response in responses:
            per_query = []
            for point in response.points:
                fields = dict(point.payload or {})
                docno = fields.pop(self.params.docno_field, None)
                if self.params.text_field != "text":
                    fields["text"] = fields.pop(self.params.text_field, None)
                per_query.append((str(docno if docno is not None else point.id), fields, self._sign * point.score))
            hits.append(per_query)
        return hits
