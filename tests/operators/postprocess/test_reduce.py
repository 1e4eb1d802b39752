"""postprocess.reduce: contract and behaviour."""

import pyarrow as pa
import pytest

from operators import create
from operators.errors import OperatorError
from operators.testing import OperatorContract, sample_results


class TestReduceContract(OperatorContract):
    operator_name = "postprocess.reduce"

    def make_operator(self, **params):
        return create("postprocess.reduce", {"k": 3, **params})


def test_keeps_top_k_per_query_by_any_rank_column():
    table = sample_results(3, 5)
    reverse = pa.array([6 - r for r in table.column("rank").to_pylist()], pa.int32())
    table = table.append_column("rank_other", reverse)
    out = create("postprocess.reduce", {"k": 2, "rank_column": "rank_other"})(table)
    assert out.column("qid").to_pylist() == ["q1", "q1", "q2", "q2", "q3", "q3"]
    assert out.column("rank").to_pylist() == [5, 4] * 3
    assert out.column("rank_other").to_pylist() == [1, 2] * 3


def test_rows_without_rank_go_last_and_k_larger_than_group_keeps_all():
    table = pa.table({"qid": ["a", "a", "a"], "docno": ["x", "y", "z"], "rank": pa.array([None, 2, 1], pa.int32())})
    out = create("postprocess.reduce", {"k": 10})(table)
    assert out.column("docno").to_pylist() == ["z", "y", "x"]


def test_rows_of_the_keep_column_stay_beyond_k_in_rank_order():
    """The service's top_k cut keeps the rows an answer cites: a top_k of 1 left sources that were no hit."""
    table = sample_results(2, 5)
    cited = pa.array([r in (2, 4) if q == "q1" else None for q, r in zip(table.column("qid").to_pylist(),
                                                                         table.column("rank").to_pylist())])
    out = create("postprocess.reduce", {"k": 1, "keep_column": "cited"})(table.append_column("cited", cited))
    assert list(zip(out.column("qid").to_pylist(), out.column("rank").to_pylist())) == [
        ("q1", 1), ("q1", 2), ("q1", 4), ("q2", 1)]
    with pytest.raises(OperatorError, match="keep_column 'docno' holds string, not true/false") as err:
        create("postprocess.reduce", {"k": 1, "keep_column": "docno"})(table)
    assert err.value.field == "params.keep_column"
