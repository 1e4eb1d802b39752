"""fuse.expanded_queries: the rankings of a query's extra queries merged back onto it with RRF."""

from __future__ import annotations

from typing import ClassVar

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.fuse._fusion import Branch, fuse_table, reciprocal_rank
from operators.tables import ranking_columns, require_columns, set_column


class ExpandedQueryFuser(Operator):
    """Merge the results of expanded queries (query.expand, decompose, keywords) per original query with RRF.

    Rows of ``<qid>#<n>`` go back to their ``original_qid`` with the original's query
    text (``original_query``, which the query operators write, where the original found
    nothing); each extra query's ranking is one branch of reciprocal rank fusion (the
    original's weighs 1, an extra query's ``expansion_weight``), through the same
    fusion code as ``fuse.rrf``. A document found by several queries comes out once.

    Usage::

        steps:
          expand: {op: query.expand, params: {strategies: [rephrase]}}
          bm25:   {op: retrieve.bm25, params: {index: sample, k: 100}}
          merged: {op: fuse.expanded_queries, params: {k: 60}}
    """

    name = "fuse.expanded_queries"
    aliases = ("merge_expansions",)
    #: The extra queries of one original are different qids, so one call must see every row.
    scope: ClassVar[str] = "corpus"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        k: float = Field(60.0, ge=0, description="RRF's rank constant.")
        expansion_weight: float = Field(1.0, ge=0, description="RRF weight of each extra query's ranking (the "
                                        "original query's weighs 1).")

    def reads(self) -> list[str]:
        return ["qid", "docno", "rank", "original_qid"]

    def produces(self) -> dict[str, str]:
        return ranking_columns(self.step_id)

    def transform(self, table: pa.Table) -> pa.Table:
        require_columns(table, self.reads(), op=self.name, step=self.step_id)
        qids = np.asarray(table.column("qid").to_pylist(), dtype=object)
        origins = np.asarray(table.column("original_qid").to_pylist(), dtype=object)
        # Branch n of an original: its n-th distinct qid (0: the original itself, which sorts first).
        variant = np.zeros(len(qids), dtype=np.int64)
        seen: dict[str, dict[str, int]] = {}
        for i, (qid, origin) in enumerate(zip(qids, origins)):
            numbers = seen.setdefault(origin, {origin: 0})
            variant[i] = numbers.setdefault(qid, len(numbers))
        branches = [Branch(f"{self.step_id}_v{n}", 1.0 if n == 0 else self.params.expansion_weight)
                    for n in range(int(variant.max()) + 1 if len(variant) else 1)]
        ranks = table.column("rank").to_numpy().astype(np.float64) if table.num_rows else np.zeros(0)
        staged = table
        for n, branch in enumerate(branches):
            staged = set_column(staged, branch.rank_column, pa.array(ranks, pa.float64(), mask=variant != n))
        if "query" in staged.column_names:
            originals = {q: text for q, o, text in zip(qids, origins, staged.column("query").to_pylist()) if q == o}
            if "original_query" in staged.column_names:  # an original that found nothing has no rows of its own
                for origin, text in zip(origins, staged.column("original_query").to_pylist()):
                    if text is not None:
                        originals.setdefault(origin, text)
            staged = set_column(staged, "query", pa.array([originals.get(o, t) for o, t in
                                                           zip(origins, staged.column("query").to_pylist())],
                                                          staged.schema.field("query").type))
        staged = set_column(staged, "qid", table.column("original_qid"))
        fused = fuse_table(staged, branches, lambda positions, _: reciprocal_rank(positions, self.params.k),
                           step=self.step_id, op=self.name, needs_scores=False)
        return fused.drop_columns([c for b in branches for c in (b.rank_column, b.score_column)
                                   if c in fused.column_names])
