"""Retrieval over several named indices at once, merged, then post-processed."""

from __future__ import annotations

import re
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

from operators.base import Operator
from operators.errors import ParamsError
from operators.filters import MetadataFilter
from operators.tables import concat, ranking_columns, set_column, set_ranking


class Collection(BaseModel):
    """One named index and how to search it."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Collection name, written to the `collection` column of its rows.",
                      pattern=r"^[A-Za-z0-9_\-]+$")
    index: str | None = Field(None, description="Name or path of an index built by tessera ingest.")
    retriever: Literal["bm25", "dense"] = Field("bm25", description="retrieve.bm25 or retrieve.dense.")
    k: int = Field(10, gt=0, le=10_000, description="Chunks taken from this collection per query.")
    filter: MetadataFilter | None = Field(None, description="Metadata filter for this collection (pre-filter).")


class PostStep(BaseModel):
    """A postprocessor applied to the merged rows: an operator from the registry and its params."""

    model_config = ConfigDict(extra="forbid")

    op: str = Field(description="Registered operator name, e.g. postprocess.dedup or postprocess.cutoff.")
    params: dict[str, Any] = Field(default_factory=dict, description="The operator's params.")


class MultiCollectionRetriever(Operator):
    """Search several named indices for each query, tag rows with their collection, merge, post-process.

    Each collection is searched by ``retrieve.bm25`` or ``retrieve.dense`` (a child
    step ``<step>_<name>``, whose ``score_``/``rank_`` columns stay on the rows) and
    its rows get ``collection: <name>``. The merged ranking orders all rows of a
    query by ``merge``: ``reciprocal_rank`` (default; ``1 / (60 + rank in its
    collection)``, which interleaves collections whose scores are not comparable,
    e.g. BM25 and dense) or ``score`` (the raw scores, for collections searched the
    same way). A document found in two collections appears twice until a
    ``postprocess.dedup`` step removes it. ``postprocess`` steps (any registered
    query- or row-scope operator) then run in order on the merged rows.

    Usage::

        MultiCollectionRetriever({
            "collections": [{"name": "papers", "index": "scifact", "k": 20},
                            {"name": "wiki", "index": "wiki", "retriever": "dense", "k": 20}],
            "postprocess": [{"op": "postprocess.dedup", "params": {"by": "doc_id"}},
                            {"op": "postprocess.cutoff", "params": {"max_chunks": 10}}],
        })(pa.table({"qid": ["1"], "query": ["honey bees"]}))
    """

    name = "retrieve.multi_collection"
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        collections: list[Collection] = Field(min_length=1, description="The indices to search, each with a "
                                              "name, index, retriever (bm25 | dense), k and optional filter.")
        merge: Literal["reciprocal_rank", "score"] = Field(
            "reciprocal_rank", description="How rows of different collections are ordered: reciprocal_rank "
            "(1/(60 + rank in its collection)) or the raw score.")
        postprocess: list[PostStep] = Field(default_factory=list, description="Operators applied in order to "
                                            "the merged rows, e.g. [{op: postprocess.dedup}, {op: "
                                            "postprocess.cutoff, params: {max_chunks: 10}}].")

        @field_validator("collections")
        @classmethod
        def _unique_names(cls, value: list[Collection]) -> list[Collection]:
            names = [c.name for c in value]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"collection names must be unique, got {dupes} more than once")
            return value

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from operators.registry import create

        self._retrievers = []
        for i, c in enumerate(self.params.collections):
            params = {"index": c.index, "k": c.k, "filter": c.filter.model_dump(by_alias=True, exclude_none=True)
                      if c.filter else None}
            self._retrievers.append(self._child(create, f"retrieve.{c.retriever}", params,
                                                f"{self.step_id}_{c.name}", f"params.collections.{i}"))
        self._post = []
        for i, p in enumerate(self.params.postprocess):
            op = self._child(create, p.op, p.params, f"{self.step_id}_post{i}", f"params.postprocess.{i}")
            if op.scope not in ("row", "query"):
                raise ParamsError(f"'{p.op}' is a {op.scope}-scope operator; postprocessors must be row or "
                                  "query scope", op=self.name, step=self.step_id, field=f"params.postprocess.{i}.op")
            self._post.append(op)

    def _child(self, create, name: str, params: dict, step_id: str, field: str) -> Operator:
        try:
            return create(name, params, step_id=step_id)
        except ParamsError as err:  # name the child inside this step's params
            inner = re.sub(r"^params\.?", "", err.field or "")
            raise ParamsError(f"{name}: {err.message}", op=self.name, step=self.step_id,
                              field=f"{field}.params.{inner}".rstrip(".") if inner else field) from None
        except Exception as err:  # an unknown operator
            raise ParamsError(str(getattr(err, "message", err)), op=self.name, step=self.step_id,
                              field=f"{field}.op") from None

    def reads(self) -> list[str]:
        return ["qid", "query"]

    def produces(self) -> dict[str, str]:
        """The merged rows' columns, with its searches' (``score_<step>_<name>``) and those its ``postprocess`` steps
        write (a reranker's score, an analysis's column): a step after this one that reads such a column is checked
        against them before the flow runs, as it is against any step's."""
        return {**{column: role for op in self._retrievers + self._post for column, role in op.produces().items()},
                **self.made_columns()}

    def made_columns(self) -> dict[str, str]:
        return {"collection": "data", "docno": "id", "doc_id": "id", "title": "data", "text": "text",
                **ranking_columns(self.step_id)}

    def nested_operators(self) -> dict[str, Operator]:
        return {**{f"params.collections.{i}": op for i, op in enumerate(self._retrievers)}, **self.row_steps()}

    def row_steps(self) -> dict[str, Operator]:
        return {f"params.postprocess.{i}": op for i, op in enumerate(self._post)}

    def required_models(self) -> dict[str, str]:
        return {f"{field}.{where}": ref for field, op in self.nested_operators().items()
                for where, ref in op.required_models().items()}

    def cache_identity(self) -> dict[str, Any]:
        identity = super().cache_identity()
        identity["children"] = [op.cache_identity() for op in self._retrievers + self._post]
        return identity

    def setup(self) -> None:
        for op in self._retrievers + self._post:
            op.ensure_setup()

    def transform(self, table: pa.Table) -> pa.Table:
        parts, scores = [], []
        for collection, retriever in zip(self.params.collections, self._retrievers):
            rows = retriever(table)
            rows = set_column(rows, "collection", pa.array([collection.name] * rows.num_rows, pa.string()))
            parts.append(rows)
            if self.params.merge == "score":
                scores.append(rows.column("score").cast(pa.float64()))
            else:
                ranks = rows.column("rank").to_numpy(zero_copy_only=False).astype("float64")
                scores.append(pa.chunked_array([pa.array(1.0 / (60.0 + ranks), pa.float64())]))
        merged = concat(parts)
        merged_scores = pa.chunked_array([c for s in scores for c in s.chunks], pa.float64()).combine_chunks()
        out = set_ranking(merged, merged_scores, self.step_id)
        for op in self._post:
            out = op(out)
        return out
