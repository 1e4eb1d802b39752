"""The contract's column-type check fails for each way an operator can get a core column's type wrong.

Each case wraps a real operator (``rerank.tfidf``) and damages one column of its output; the unchanged operator
passes. Without this, the check could stop checking and every contract test would still pass.
"""

import pyarrow as pa
import pytest

from operators.errors import OperatorError
from operators.registry import get_operator
from operators.tables import set_column
from operators.testing import OperatorContract

DAMAGE = {
    "score": lambda t, step: set_column(t, "score", t.column("score").cast(pa.float32())),
    "rank": lambda t, step: set_column(t, "rank", t.column("rank").cast(pa.int64())),
    "rank_": lambda t, step: set_column(t, f"rank_{step}", t.column(f"rank_{step}").cast(pa.int64())),
    "qid": lambda t, step: set_column(t, "qid", t.column("qid").cast(pa.binary())),
    "docno": lambda t, step: set_column(t, "docno", t.column("docno").dictionary_encode()),
    "empty batch": lambda t, step: t if t.num_rows else set_column(t, "score", pa.nulls(0)),
    "no rows": lambda t, step: t.slice(0, 0),
}
#: What the failure must name for each case.
NAMED = {"score": "'score' is float", "rank": "'rank' is int64", "rank_": "is int64, expected int32",
         "qid": "'qid' is binary", "docno": "'docno' is dictionary", "empty batch": "(on an empty batch)",
         "no rows": "returned no rows"}


def contract_of(damage=None) -> OperatorContract:
    tfidf = get_operator("rerank.tfidf")

    class Damaged(tfidf):
        def transform(self, table):
            return damage(super().transform(table), self.step_id)

    class Contract(OperatorContract):
        operator_name = "rerank.tfidf"

        def make_operator(self, **params):
            return (Damaged if damage else tfidf)(params)

    return Contract()


def failures(contract: OperatorContract) -> str:
    """What the contract's checks that look at the outputs' types say (empty: they passed)."""
    said = []
    for check in (contract.test_one_query, contract.test_several_queries, contract.test_empty_table):
        try:
            check()
        except (AssertionError, OperatorError) as err:  # OperatorError: the check every call makes said it first
            said.append(str(err))
    return "\n".join(said)


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_wrong_column_type_fails_the_contract_naming_it(case):
    assert NAMED[case] in failures(contract_of(DAMAGE[case]))


def test_the_operator_as_it_is_passes():
    assert failures(contract_of()) == ""


def test_large_string_text_is_written_as_string_after_each_call():
    """The same text in another type: cast after each call, so a result's types do not depend on whether a step ran
    or came from the cache (which stores string); it was let through as large_string before."""
    tfidf = get_operator("rerank.tfidf")

    class Large(tfidf):
        def transform(self, table):
            out = super().transform(table)
            for name in ("qid", "query", "docno", "text"):
                out = set_column(out, name, out.column(name).cast(pa.large_string()))
            return out

    contract = contract_of()
    table = contract.make_input(n_queries=2)
    out = Large({})(table)
    assert all(out.schema.field(name).type == pa.string() for name in ("qid", "query", "docno", "text"))
    assert out.equals(tfidf({})(table))
