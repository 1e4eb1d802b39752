"""Reciprocal rank fusion of a fan-in's branches."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.fuse._fusion import fuse_table, reciprocal_rank, resolve_branches


class ReciprocalRankFusion(Operator):
    """Fuse the rankings of several branches with reciprocal rank fusion (RRF).

    Each document scores ``sum over branches b of weight_b / (k + rank_b)``, where
    ``rank_b`` is its position in branch ``b``'s list for the query (Cormack, Clarke
    & Buettcher, SIGIR 2009; k = 60 as in the paper). Branches are the fan-in's
    input steps (``inputs: [bm25, dense]``): a row belongs to branch ``b`` when its
    ``rank_<b>`` is set. A document found by several branches comes out once, with
    every branch's ``score_<b>``/``rank_<b>`` on its row; the same document twice in
    one branch counts once, at its best rank. Ties in the fused score are broken by
    docno, so the result does not depend on the order of the input rows.

    Usage (in a flow)::

        steps:
          bm25:  {op: retrieve.bm25,  params: {k: 100}}
          dense: {op: retrieve.dense, params: {k: 100}, inputs: []}
          fused: {op: fuse.rrf, inputs: [bm25, dense], params: {k: 60}}
    """

    name = "fuse.rrf"
    aliases = ("rrf",)
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        k: float = Field(60.0, ge=0, description="RRF's rank constant: larger values flatten the "
                         "difference between top and lower ranks.", examples=[60])
        weights: dict[str, float] | None = Field(
            None, description="Weight per branch step id (default 1.0 each), e.g. {bm25: 1.0, dense: 2.0}.")
        branches: list[str] | None = Field(
            None, min_length=1, description="Step ids whose rank_<step> columns hold the rankings to fuse; "
            "default: this step's inputs. Set it when a branch ends in a step that does not rank.")

    def reads(self) -> list[str]:
        return ["qid", "docno"]

    def produces(self) -> dict[str, str]:
        return {"score": "score", "rank": "rank", f"score_{self.step_id}": "score",
                f"rank_{self.step_id}": "rank"}

    def cache_identity(self) -> dict[str, Any]:
        identity = super().cache_identity()
        identity["branches"] = list(self.params.branches or self.input_steps)
        return identity

    def transform(self, table: pa.Table) -> pa.Table:
        branches = resolve_branches(self.params.branches, self.input_steps, self.params.weights,
                                    op=self.name, step=self.step_id)
        k = self.params.k

        def score(positions: np.ndarray, _scores: np.ndarray) -> np.ndarray:
            return reciprocal_rank(positions, k)

        return fuse_table(table, branches, score, step=self.step_id, op=self.name, needs_scores=False)
