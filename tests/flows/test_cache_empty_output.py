"""A query-scope step that keeps no row of any query gives the same columns and types with the step cache as
without: the run's empty result took its schema from a call on an empty table, where the step had written its
column on a full one (``int64`` without the cache, ``null`` with it)."""

from __future__ import annotations

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from flows.cache import StepCache
from flows.executors.local import LocalExecutor
from operators.base import Operator
from operators.registry import get_operator
from operators.tables import set_column
from tests.flows.ray_flows import flow_by_hand


class KeepsNothing(Operator):
    """Marks every row, then keeps none (a filter that no row passes); its mark is typed by the values it wrote."""

    name = "test.keeps_nothing"
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")

    def produces(self) -> dict[str, str]:
        return {"mark": "data"}

    def transform(self, table: pa.Table) -> pa.Table:
        return set_column(table, "mark", pa.array([1] * table.num_rows)).slice(0, 0)


def test_an_empty_result_has_its_types_with_the_cache_as_without(tmp_path):
    corpus = get_operator("retrieve.corpus_bm25")({"corpus": str(tmp_path / "c.jsonl"), "k": 2})
    (tmp_path / "c.jsonl").write_text('{"_id": "a", "text": "honey bees"}\n{"_id": "b", "text": "opera"}\n')
    flow = flow_by_hand("nothing", [("search", corpus, []), ("keep", KeepsNothing({}), None)])
    queries = ["honey", "opera"]
    plain = LocalExecutor(cache=None).run(flow, queries).table
    cached = LocalExecutor(cache=StepCache(tmp_path / "cache")).run(flow, queries).table
    assert plain.num_rows == cached.num_rows == 0
    assert plain.schema.field("mark").type == pa.int64()
    assert cached.schema == plain.schema
