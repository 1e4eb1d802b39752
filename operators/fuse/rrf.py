"""Reciprocal rank fusion of a fan-in's branches."""

from __future__ import annotations

import numpy as np
from pydantic import Field

from operators.fuse._fusion import Fuser, FusionParams, reciprocal_rank


class ReciprocalRankFuser(Fuser):
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
    needs_scores = False  # RRF uses ranks only

    class Params(FusionParams):
        k: float = Field(60.0, ge=0, description="RRF's rank constant: larger values flatten the "
                         "difference between top and lower ranks.", examples=[60])

    def branch_scores(self, positions: np.ndarray, scores: np.ndarray) -> np.ndarray:
        return reciprocal_rank(positions, self.params.k)
