"""Renumbering ranks after rows were removed (shared by the postprocess steps of this area)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from operators.tables import ranks_within_qid, set_column, sort_by_qid_then_score


def renumber(table: pa.Table, rank_column: str = "rank") -> pa.Table:
    """Rows ordered by qid (first appearance), then ``rank_column`` (nulls last, ties by docno);
    ``rank`` renumbered 1..n within each qid in that order. Other rank columns are kept."""
    if table.num_rows == 0 or rank_column not in table.column_names:
        return table
    key = "__order"
    keyed = table.append_column(key, pc.negate(table.column(rank_column).cast(pa.float64())))
    ordered = sort_by_qid_then_score(keyed, key).drop_columns([key])
    ranks = ranks_within_qid(ordered)
    if "rank" in ordered.column_names and ordered.schema.field("rank").type != pa.int32():
        ordered = ordered.drop_columns(["rank"])
    return set_column(ordered, "rank", ranks)
