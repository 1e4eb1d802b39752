"""Dense (embedding) retrieval over an on-disk index built by ``tessera ingest``."""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

from pydantic import Field

from operators.errors import OperatorError
from operators.models.batching import CPU_BATCH
from operators.retrieve._index_retriever import IndexRetriever, RetrieverParams, shared_index

log = logging.getLogger(__name__)


#: (index, weights) whose mismatch was said, once each in a process.
_OTHER_WEIGHTS_SAID: set[tuple[str, str]] = set()


class DenseRetriever(IndexRetriever):
    """Rank the chunks of an on-disk index by inner product with the embedded query (FAISS).

    Queries are embedded with the index's own encoder (``settings.encoder``, through
    ``embed.sentence_transformer``: packaged weights, L2-normalised, so the score is
    cosine similarity for normalised chunk vectors), loaded once per process. When the
    encoder's ONNX export exists, queries skip torch (``operators.models.onnx_query_encoder``:
    the same vectors, seconds less start-up; ``TESSERA_QUERY_ENCODER=torch`` turns it off). Output
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
        self._embed = None  # texts -> (n, dim) vectors, through whichever encoder check_index chose

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

    def cache_identity(self) -> dict[str, Any]:
        """The index's, and its encoder's weights: a model retrained under its name (``tessera-bi-encoder``) embeds
        queries otherwise, and its cached rankings were replayed."""
        identity = super().cache_identity()
        if (weights := self.encoder_weights()) is not None:
            identity["weights"] = weights
        return identity

    def encoder_weights(self) -> str | None:
        """The fingerprint of the index's encoder's files, None without an index or that model here (the run
        names what is missing)."""
        from operators.models.fingerprint import weights_fingerprint
        from operators.models.references import ModelNotFoundError

        encoder = self.required_models().get("params.index (its encoder)")
        try:
            return weights_fingerprint(encoder) if encoder else None
        except ModelNotFoundError:
            return None

    def check_index(self, index) -> None:
        from operators.store.index import other_encoder_weights

        super().check_index(index)  # an index without vectors
        made, now = other_encoder_weights(index) or (None, None)
        if made and (str(index.path), now) not in _OTHER_WEIGHTS_SAID:
            # the queries are embedded in another space than the index's vectors: said (once), not refused, as a
            # package's reinstall that rewrites a config file changes the fingerprint without changing the vectors
            _OTHER_WEIGHTS_SAID.add((str(index.path), now))
            log.warning(
                "index '%s' was embedded by other weights of encoder '%s' than this machine's (%s, here %s: "
                "retrained since, or another copy): its scores compare vectors of two models; ingest its corpus "
                "into a new index", self.params.index, index.settings.encoder, made, now)
        self._encoder = self._query_encoder(index.settings.encoder)
        if self._encoder.dimension != index.settings.dim:
            raise OperatorError(f"encoder '{index.settings.encoder}' gives {self._encoder.dimension}-d vectors but "
                                f"index '{self.params.index}' holds {index.settings.dim}-d ones",
                                op=self.name, step=self.step_id, field="params.index")

    def _query_encoder(self, reference: str):
        """The torch-free ONNX encoder when it reproduces ``reference`` here, else ``embed.sentence_transformer``
        (whose first CPU use exports the model to ONNX for later processes). A process without torch exports a
        missing model first (``_export_first``)."""
        from operators.models.onnx_query_encoder import (ENV, FastPathUnavailable, export_query_encoder,
                                                         load_onnx_query_encoder, query_encoder_mode)

        try:
            mode = query_encoder_mode()
        except FastPathUnavailable as err:
            raise OperatorError(str(err), op=self.name, step=self.step_id, field=ENV) from None
        if mode != "torch":
            try:
                if mode == "onnx" or _export_first():
                    export_query_encoder(reference, wait=True)  # required, or cheaper here than torch: made now
                encoder = load_onnx_query_encoder(reference)
                self._embed = functools.partial(encoder.encode, batch_size=self.params.encode_batch_size or CPU_BATCH)
                return encoder
            except FastPathUnavailable as err:
                if mode == "onnx":
                    raise OperatorError(f"{ENV}=onnx, but the ONNX query encoder cannot embed with '{reference}': "
                                        f"{err}", op=self.name, step=self.step_id, field=ENV) from None
                log.debug("queries of %s embed through torch: %s", self.step_id, err)
        from operators.embed.sentence_transformer import SentenceTransformerEmbedder

        params = {"model": reference, "input_column": "query", "encode_batch_size": self.params.encode_batch_size}
        encoder = SentenceTransformerEmbedder(params, step_id=f"{self.step_id}.encoder")
        encoder.ensure_setup()
        self._embed = encoder.encode
        export_query_encoder(reference)
        return encoder

    def search(self, texts, k, where):
        prompt = self.params.query_prompt or ""
        return self.index.search_dense(self._embed([prompt + t for t in texts]), k, where=where)


def _export_first() -> bool:
    """Whether a missing export is made before the first query rather than after it: in a process without torch
    and on a machine without an NVIDIA driver (where the model would run on a GPU and is not exported). The export
    runs in a child process, so this one (a Serve replica, a task worker) never loads torch: about 250 MB for its
    life against 570 MB with torch's (about 1.2 GB when the export ran in the process)."""
    import sys

    return "torch" not in sys.modules and not os.path.exists("/proc/driver/nvidia/version")
