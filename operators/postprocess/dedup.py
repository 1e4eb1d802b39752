"""De-duplicate results by chunk (docno) or by source document (doc_id)."""

from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.tables import concat, empty_like, qid_groups, set_ranking


class ResultDeduplicator(Operator):
    """Keep one result per chunk (``docno``) or per source document (``doc_id``) in each query.

    The best-ranked row of each key wins (lowest ``rank_column``; ties: higher score,
    then first seen). Rows with no key (a null ``doc_id``) are all kept. Rows keep
    their order; ``rank`` is renumbered 1..n within each query. ``by: doc_id`` keeps
    one chunk per document, so a long document cannot fill the whole top k.

    Usage::

        ResultDeduplicator({"by": "doc_id"})(results)
    """

    name = "postprocess.dedup"
    aliases = ("dedup_results",)
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        by: Literal["docno", "doc_id"] = Field("docno", description="docno: one row per chunk; doc_id: one row "
                                               "per source document.")
        rank_column: str = Field("rank", description="Rank column (1 = best) that decides which duplicate stays.")

    def reads(self) -> list[str]:
        return ["qid", self.params.by, self.params.rank_column]

    def produces(self) -> dict[str, str]:
        return {"rank": "rank"}

    def transform(self, table: pa.Table) -> pa.Table:
        if table.num_rows == 0:
            return table
        kept = []
        for _, group in qid_groups(table):
            keys = np.asarray(group.column(self.params.by).to_pylist(), dtype=object)
            ranks = group.column(self.params.rank_column).cast(pa.float64()).to_numpy(zero_copy_only=False)
            scores = (group.column("score").cast(pa.float64()).to_numpy(zero_copy_only=False)
                      if "score" in group.column_names else np.zeros(group.num_rows))
            order = np.lexsort((np.arange(group.num_rows), -np.nan_to_num(scores, nan=-np.inf),
                                np.nan_to_num(ranks, nan=np.inf)))
            seen, picked = set(), []
            for i in order:
                key = keys[i]
                if key is None or key not in seen:
                    picked.append(i)
                    if key is not None:
                        seen.add(key)
            kept.append(group.take(pa.array(sorted(picked))))
        return set_ranking(concat(kept) if kept else empty_like(table), rank_by=self.params.rank_column)
