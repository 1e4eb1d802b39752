"""Similarity cutoff and a per-query chunk budget."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, model_validator

from operators.base import Operator
from operators.tables import set_ranking


class SimilarityCutoffFilter(Operator):
    """Drop results scoring below a threshold and keep at most ``max_chunks`` per query.

    As LlamaIndex's ``SimilarityCutoffPostprocessor``: a row is kept when its score is
    at least ``similarity_cutoff`` (a row without a score is dropped); then the best
    ``max_chunks`` rows of each query (by ``rank_column``) are kept. Rows keep their
    order; ``rank`` is renumbered 1..n within each query.

    Usage::

        SimilarityCutoffFilter({"similarity_cutoff": 0.35, "max_chunks": 5})(results)
    """

    name = "postprocess.cutoff"
    aliases = ("cutoff", "similarity_cutoff")
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        similarity_cutoff: float | None = Field(None, description="Keep rows whose score is at least this "
                                                "(None: no threshold).", examples=[0.3, 0.5])
        max_chunks: int | None = Field(None, gt=0, description="Keep at most this many rows per query "
                                       "(None: no limit).", examples=[3, 5, 10])
        score_column: str = Field("score", description="Score column the threshold applies to.")
        rank_column: str = Field("rank", description="Rank column (1 = best) that orders rows for max_chunks.")

        @model_validator(mode="after")
        def _something_to_do(self):
            if self.similarity_cutoff is None and self.max_chunks is None:
                raise ValueError("set similarity_cutoff, max_chunks or both")
            return self

    def reads(self) -> list[str]:
        columns = ["qid", self.params.rank_column]
        if self.params.similarity_cutoff is not None:
            columns.append(self.params.score_column)
        return columns

    def produces(self) -> dict[str, str]:
        return {"rank": "rank"}

    def transform(self, table: pa.Table) -> pa.Table:
        if self.params.similarity_cutoff is not None:
            scores = table.column(self.params.score_column).cast(pa.float64())
            keep = pc.fill_null(pc.greater_equal(scores, self.params.similarity_cutoff), False)
            table = table.filter(keep)
        table = set_ranking(table, rank_by=self.params.rank_column)
        if self.params.max_chunks is not None and table.num_rows:
            table = table.filter(pa.array(table.column("rank").to_numpy() <= self.params.max_chunks))
        return table
