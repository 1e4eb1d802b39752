"""Normalised, weighted score fusion of a fan-in's branches."""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.fuse._fusion import fuse_table, normalise, resolve_branches


class WeightedScoreFusion(Operator):
    """Fuse several branches by a weighted sum of their per-query normalised scores.

    Each branch's scores (``score_<b>``) are normalised per query, then summed with
    the branch weights; a document a branch did not find adds 0 for it (CombSUM
    with weights, as ranx's ``wsum``). Normalisations: ``min-max`` (default),
    ``max``, ``sum`` and ``z-score``. A branch whose scores for a query are all
    equal (one hit, a flat list) normalises to 1.0 each under ``min-max`` and
    ``max`` and to ``1/n`` each under ``sum`` -- never to all zeros -- and to 0.0
    (the mean) under ``z-score``. A document found by several branches comes out
    once, with every branch's ``score_<b>``/``rank_<b>`` on its row.

    Usage (in a flow)::

        fused: {op: fuse.weighted, inputs: [bm25, dense],
                params: {normalisation: min-max, weights: {bm25: 0.3, dense: 0.7}}}
    """

    name = "fuse.weighted"
    aliases = ("fuse.wsum",)
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        normalisation: Literal["min-max", "max", "sum", "z-score"] = Field(
            "min-max", description="How each branch's scores are normalised per query before the weighted sum.")
        weights: dict[str, float] | None = Field(
            None, description="Weight per branch step id (default 1.0 each), e.g. {bm25: 0.3, dense: 0.7}.")
        branches: list[str] | None = Field(
            None, min_length=1, description="Step ids whose score_<step>/rank_<step> columns hold the rankings "
            "to fuse; default: this step's inputs. Set it when a branch ends in a step that does not rank.")

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
        method = self.params.normalisation

        def score(_positions: np.ndarray, scores: np.ndarray) -> np.ndarray:
            scores = np.where(np.isnan(scores), np.nanmin(scores) if not np.isnan(scores).all() else 0.0, scores)
            return normalise(scores, method)

        return fuse_table(table, branches, score, step=self.step_id, op=self.name, needs_scores=True)
