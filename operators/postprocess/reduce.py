"""Reduction: keep the top-k rows of each query."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.errors import OperatorError
from operators.tables import qid_groups, concat, empty_like


class Reducer(Operator):
    """Keep the top k rows of each query by any rank column (mosaicRAG's reduction step).

    Rows are ordered by the chosen rank column (1 = best; rows without a rank go last),
    cut to ``k`` per query. ``rank``/``score`` are left as they are, so the kept rows
    still show the ranking that chose them. ``keep_column`` names a boolean column whose
    true rows stay beyond ``k`` (an answer's ``cited`` rows: the service's ``top_k`` cut
    left an answer citing documents the response did not hold).

    Usage::

        Reducer({"k": 2, "rank_column": "rank"})(results)  # two rows per qid
    """

    name = "postprocess.reduce"
    aliases = ("reduction", "reduce", "ReductionStep")  # mosaicRAG step id and class name
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        k: int = Field(10, gt=0, description="Rows to keep per query.")
        rank_column: str = Field("rank", description="Rank column that orders the rows (1 = best).")
        keep_column: str | None = Field(None, min_length=1, description="A boolean column whose true rows are kept "
                                        "beyond k, in rank order (an answer's `cited` rows); null: none.")

    def cache_identity(self) -> dict:
        identity = super().cache_identity()
        if identity.get("keep_column") is None:  # added later: unset, a step keys as before (its cached rows)
            identity.pop("keep_column", None)
        return identity

    def reads(self) -> list[str]:
        return ["qid", self.params.rank_column, *([self.params.keep_column] if self.params.keep_column else [])]

    def transform(self, table: pa.Table) -> pa.Table:
        if table.num_rows == 0:
            return table
        keep = self.params.keep_column
        if keep and not pa.types.is_boolean(table.column(keep).type):
            raise OperatorError(f"keep_column '{keep}' holds {table.column(keep).type}, not true/false",
                                op=self.name, step=self.step_id, field="params.keep_column")
        kept = []
        for _, group in qid_groups(table):
            ranks = group.column(self.params.rank_column).to_numpy(zero_copy_only=False).astype(float)
            ranks = np.where(np.isnan(ranks), np.inf, ranks)
            order = np.argsort(ranks, kind="stable")
            top = np.zeros(len(order), dtype=bool)
            top[order[: self.params.k]] = True
            if keep:
                top |= group.column(keep).fill_null(False).to_numpy(zero_copy_only=False)
            kept.append(group.take(pa.array(order[top[order]])))
        return concat(kept) if kept else empty_like(table)
