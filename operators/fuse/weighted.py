"""Normalised, weighted score fusion of a fan-in's branches."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from operators.fuse._fusion import Fuser, FusionParams, normalise


class WeightedScoreFuser(Fuser):
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

    class Params(FusionParams):
        normalisation: Literal["min-max", "max", "sum", "z-score"] = Field(
            "min-max", description="How each branch's scores are normalised per query before the weighted sum.")

    def branch_scores(self, positions: np.ndarray, scores: np.ndarray) -> np.ndarray:
        scores = np.where(np.isnan(scores), np.nanmin(scores) if not np.isnan(scores).all() else 0.0, scores)
        return normalise(scores, self.params.normalisation)
