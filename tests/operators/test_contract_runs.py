"""The operator contract runs an operator once on its sample input for the three checks that read that run (declared
outputs, several queries, input untouched): a model operator's forward passes were most of a contract's time, three
times over. Another input or other params are a run of their own."""

from operators.registry import get_operator
from operators.testing import OperatorContract


def counted_contract() -> tuple[type[OperatorContract], list]:
    """A contract class of a real operator (``rerank.tfidf``, with each instance's ``params``) and the operator's
    calls, one item (the rows and the params) per table it transforms."""
    tfidf, calls = get_operator("rerank.tfidf"), []

    class Counted(tfidf):
        def transform(self, table):
            calls.append((table.num_rows, self.params.similarity))
            return super().transform(table)

    class Contract(OperatorContract):
        operator_name = "rerank.tfidf"
        params: dict = {}

        def make_operator(self, **given):
            return Counted({**self.params, **given})

    return Contract, calls


def test_the_checks_of_the_sample_input_share_one_run():
    contract_class, calls = counted_contract()
    contract = contract_class()
    contract.test_declared_outputs_appear()
    contract.test_several_queries()
    contract.test_passthrough_and_input_untouched()
    rows = contract.make_input().num_rows
    assert calls == [(rows, "cosine")]
    contract.test_one_query()  # another input: run again
    assert calls == [(rows, "cosine"), (contract.make_input(n_queries=1).num_rows, "cosine")]


def test_other_params_are_a_run_of_their_own():
    contract_class, calls = counted_contract()
    contract, other = contract_class(), contract_class()
    other.params = {"similarity": "bm25"}
    for checks in (contract, other, contract, other):
        checks.test_declared_outputs_appear()
    rows = contract.make_input().num_rows
    assert calls == [(rows, "cosine"), (rows, "bm25")]
