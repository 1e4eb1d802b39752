"""ColBERT reranking: late interaction (MaxSim) between query and document token vectors."""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Literal, Sequence

import numpy as np
import pyarrow as pa
from pydantic import Field

from operators.errors import FlowCancelled, OperatorError
from operators.local_files import local_path
from operators.models.batching import forward_batch_size
from operators.models.fingerprint import LoadsParamsModel
from operators.rerank.base import RerankParams, Reranker

log = logging.getLogger(__name__)


class Candidates(list):
    """Candidate texts of one query that also carry their docnos (for the precomputed token lookup)."""

    def __init__(self, texts: Sequence[str], docnos: Sequence[str]) -> None:
        super().__init__(texts)
        self.docnos = list(docnos)


class ColbertReranker(LoadsParamsModel, Reranker):
    """Rerank each query's top candidates with a ColBERT model: sum over query tokens of the best match.

    Query and candidates are encoded into L2-normalised token vectors; a candidate's
    score is MaxSim, the sum (``aggregation: mean``: the average) over query tokens
    of the largest dot product with any of its tokens. Candidate tokens come from the
    index's precomputed token store when there is one for this model (``tessera ingest
    --colbert MODEL``; ``token_store: auto`` looks in ``index``), else they are encoded
    on the fly; both give the same ranking (a candidate whose text differs from the indexed
    one, rewritten by a step before, is encoded on the fly). Texts longer than ``doc_maxlen`` tokens
    are truncated. Any ColBERT checkpoint loads: one trained by ``tessera train``, a
    PyLate folder or a Stanford ColBERT folder.

    Usage::

        ColbertReranker({"model": "tessera-colbert", "n": 100, "index": "scifact"})(first_stage_results)
    """

    name = "rerank.colbert"
    aliases = ("colbert",)
    #: Needs nothing of the index: ``index`` only locates precomputed tokens (read by FlowSpec.index_features).
    index_features: ClassVar[tuple[str, ...]] = ()

    class Params(RerankParams):
        model: str = Field("tessera-colbert", description="ColBERT reference: a model trained by `tessera train` "
                           "(by name, in $TESSERA_HOME/models), or a local Tessera, PyLate or Stanford ColBERT "
                           "checkpoint folder.")
        device: str | None = Field(None, description="Torch device ('cpu', 'cuda'); default: the GPU if any.")
        query_maxlen: int | None = Field(None, gt=2, le=512, description="Query tokens (queries are padded with "
                                         "[MASK] to it); default: the checkpoint's.")
        doc_maxlen: int | None = Field(None, gt=2, le=512, description="Candidate tokens at most; longer texts "
                                       "are truncated. Default: the checkpoint's.")
        aggregation: Literal["sum", "mean"] = Field("sum", description="Combine the per-query-token maxima: "
                                                    "'sum' (ColBERT) or 'mean' (the same ranking, scores in [-1, 1]).")
        token_store: str | None = Field(
            "auto", json_schema_extra=local_path("auto"),
            description="Precomputed candidate tokens: 'auto' uses those of `index` for this model when they exist; "
            "a path (a token store folder or an index folder) requires them; null always encodes on the fly. "
            "Candidates missing from the store are encoded on the fly.")
        index: str | None = Field(None, description="Index the candidates came from (name or path; flows fill it in "
                                  "like the retrievers'); only used to find its precomputed tokens.")
        encode_batch_size: int | None = Field(None, gt=0, description="Texts per forward pass (default: 16 on CPU, "
                                              "128 on a GPU; operators.models.batching).")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.model = None
        self.store = None
        #: Candidates scored from the token store / encoded on the fly, since setup (for monitoring and tests).
        self.counts = {"stored": 0, "encoded": 0}

    def setup(self) -> None:
        from operators.errors import TesseraError
        from operators.models.colbert import load_colbert

        try:
            self.model = load_colbert(self.params.model, device=self.params.device)
        except TesseraError as err:  # not found, not a ColBERT checkpoint
            raise OperatorError(f"cannot load ColBERT model '{self.params.model}': {err.message}", op=self.name,
                                step=self.step_id, field="params.model") from None
        self.store = self._open_store()

    def _open_store(self):
        from operators.store.token_store import TokenStoreError, find_token_store, open_token_store

        params = self.params
        recipe = {"doc_maxlen": self.model.maxlen(query=False, maxlen=params.doc_maxlen),
                  "text_column": params.text_column, "title_column": params.title_column}
        if params.token_store is None:
            return None
        try:
            if params.token_store == "auto":
                if not params.index:
                    return None
                store = find_token_store(params.index, self.model, **recipe)
                if store is None:
                    log.info("%s [%s]: no precomputed tokens for model %s in index %s; encoding candidates on the "
                             "fly", self.name, self.step_id, params.model, params.index)
                return store
            return open_token_store(params.token_store, self.model, **recipe)
        except TokenStoreError as err:
            raise OperatorError(err.message, op=self.name, step=self.step_id, field="params.token_store") from None

    def candidate_texts(self, rows: pa.Table) -> Candidates:
        return Candidates(super().candidate_texts(rows), rows.column("docno").cast(pa.string()).to_pylist())

    def score_queries(self, queries: Sequence[str], texts: Sequence[Sequence[str]]) -> list[np.ndarray | Exception]:
        """All queries in one encoding pass; candidates from the store where it has them, the rest in one pass."""
        from operators.models.colbert import maxsim

        try:
            batch = forward_batch_size(self.params.encode_batch_size, self.model)
            encoded_queries = self.model.encode_queries(list(queries), batch_size=batch,
                                                        maxlen=self.params.query_maxlen)
            matrices = self._candidate_tokens(texts)
        except FlowCancelled:
            raise
        except Exception as err:  # noqa: BLE001  (the failure policy decides, per query)
            return [err] * len(queries)
        similarity = self.model.config.similarity
        return [maxsim(q, docs, aggregation=self.params.aggregation, similarity=similarity)
                for q, docs in zip(encoded_queries, matrices)]

    def _candidate_tokens(self, texts: Sequence[Sequence[str]]) -> list[list[np.ndarray]]:
        """Per query, one token matrix per candidate (store rows are fp16, encoded rows float32)."""
        out: list[list[Any]] = []
        todo: dict[str, list[tuple[int, int]]] = {}  # text -> places that need it encoded
        for q, candidates in enumerate(texts):
            docnos = getattr(candidates, "docnos", None)
            found = self.store.get(docnos, texts=candidates) if self.store is not None and docnos is not None \
                else [None] * len(candidates)  # a candidate whose text a step before rewrote is encoded here
            out.append(found)
            for c, (text, matrix) in enumerate(zip(candidates, found)):
                if matrix is None:
                    todo.setdefault(text, []).append((q, c))
        self.counts["stored"] += sum(len(c) for c in texts) - sum(len(p) for p in todo.values())
        if todo:
            unique = list(todo)
            batch = forward_batch_size(self.params.encode_batch_size, self.model)
            encoded = self.model.encode_documents(unique, batch_size=batch,
                                                  maxlen=self.params.doc_maxlen)
            for text, matrix in zip(unique, encoded):
                for q, c in todo[text]:
                    out[q][c] = matrix
            self.counts["encoded"] += sum(len(p) for p in todo.values())
        return out
