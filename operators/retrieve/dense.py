"""Dense (embedding) retrieval over an on-disk index built by ``tessera ingest``."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from operators.errors import OperatorError
from operators.retrieve._index_retriever import IndexRetriever, RetrieverParams, shared_index


class DenseRetriever(IndexRetriever):
    """Rank the chunks of an on-disk index by inner product with the embedded query (FAISS).

    Queries are embedded with the index's own encoder (``settings.encoder``, through
    ``embed.sentence_transformer``: packaged weights, L2-normalised, so the score is
    cosine similarity for normalised chunk vectors), loaded once per process. Output
    rows as ``retrieve.bm25``: ``qid, query``, ``docno, doc_id, title, text``, the doc
    store's metadata columns, ``score, rank`` and ``score_<step>``/``rank_<step>``.
    ``filter`` restricts the search (``pre``: a FAISS id selector) or filters the top
    ``k * expand_factor`` (``post``). The cache key includes the index path and
    manifest generation.

    Usage::

        DenseRetriever({"index": "scifact", "k": 10})(pa.table({"qid": ["1"], "query": ["honey bees"]}))
    """

    name = "retrieve.dense"
    aliases = ("dense",)
    index_features = ("dense",)  # an index built for this step needs vectors

    class Params(RetrieverParams):
        query_prompt: str | None = Field(None, description="Prefix added to every query before embedding "
                                         "(e.g. 'query: ' for E5 encoders).")
        encode_batch_size: int | None = Field(None, gt=0, le=4096, description="Queries per forward pass "
                                              "(default: 16 on CPU, 128 on a GPU).")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._encoder = None

    def required_models(self) -> dict[str, str]:
        """The encoder of ``params.index``, read from its manifest (an index that does not open needs
        none here: the step names that error when it runs)."""
        if not self.params.index:
            return {}
        from operators.store import IndexStoreError, resolve_index

        try:
            return {"params.index (its encoder)": shared_index(resolve_index(self.params.index)).settings.encoder}
        except IndexStoreError:
            return {}

    def check_index(self, index) -> None:
        if not index.settings.dense:
            raise OperatorError(f"index '{self.params.index}' was built without vectors (dense: false); "
                                "use retrieve.bm25 or re-ingest with dense: true",
                                op=self.name, step=self.step_id, field="params.index")
        from operators.embed.sentence_transformer import SentenceTransformerEmbedder

        params = {"model": index.settings.encoder, "input_column": "query",
                  "encode_batch_size": self.params.encode_batch_size}
        self._encoder = SentenceTransformerEmbedder(params, step_id=f"{self.step_id}.encoder")
        self._encoder.ensure_setup()
        if self._encoder.dimension != index.settings.dim:
            raise OperatorError(f"encoder '{index.settings.encoder}' gives {self._encoder.dimension}-d vectors but "
                                f"index '{self.params.index}' holds {index.settings.dim}-d ones",
                                op=self.name, step=self.step_id, field="params.index")

    def search(self, texts, k, where):
        prompt = self.params.query_prompt or ""
        return self.index.search_dense(self._encoder.encode([prompt + t for t in texts]), k, where=where)
