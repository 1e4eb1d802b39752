"""Filter results by their metadata (the retrievers' filter model, applied after the fact)."""

from __future__ import annotations

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.filters import MetadataFilter, filter_table
from operators.tables import set_ranking


class ResultFilter(Operator):
    """Keep the result rows whose metadata match a filter (equality, in, ranges, dates, country/region).

    The filter is the one ``retrieve.bm25``/``retrieve.dense`` take (see
    ``operators/filters.py``), applied to the rows' columns. Rows keep their
    order; ``rank`` is renumbered 1..n within each query. A filter naming a column the
    rows do not have is an error that names the column.

    Usage::

        ResultFilter({"filter": {"field": "year", "gte": 2015}})(results)
    """

    name = "postprocess.filter"
    aliases = ("metadata_filter",)
    scope = "query"  # renumbering ranks needs whole queries

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        filter: MetadataFilter = Field(description="The filter rows must match.")
        rank_column: str = Field("rank", description="Rank column that orders the kept rows before renumbering.")

    def reads(self) -> list[str]:
        return sorted(self.params.filter.columns())

    def requires(self) -> list[str]:
        return []  # a missing filter column is a FilterError that names the filter field

    def required_columns(self) -> list[str]:
        return sorted(self.params.filter.columns())  # a flow that cannot bring them is refused before it runs

    def transform(self, table: pa.Table) -> pa.Table:
        out = filter_table(table, self.params.filter, step=self.step_id, op=self.name)
        if "qid" not in out.column_names or self.params.rank_column not in out.column_names:
            return out  # rows that are not results (a documents table) have no ranks to renumber
        return set_ranking(out, rank_by=self.params.rank_column)
