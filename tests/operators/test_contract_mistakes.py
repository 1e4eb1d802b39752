"""The contract's checks of an author's mistakes. What a row-scope step's cache relies on: its output depends
only on the columns ``reads()`` names (the cache keys each row by them), and it changes only the columns
``produces()`` declares (a hit takes every other column from the input); each case wraps a real operator
(``analyze.word_count``) and breaks one promise, and the unchanged operator passes both checks. A description and
params of its own."""

import re

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.errors import OperatorError, ParamsError
from operators.registry import get_operator
from operators.tables import set_column
from operators.testing import OperatorContract


def contract_of(transform=None) -> OperatorContract:
    word_count = get_operator("analyze.word_count")

    class Broken(word_count):
        def transform(self, table):
            return transform(super().transform(table))

    class Contract(OperatorContract):
        operator_name = "analyze.word_count"

        def make_operator(self, **params):
            return (Broken if transform else word_count)(params)

    return Contract()


def counts_the_query_too(table: pa.Table) -> pa.Table:
    """Reads ``query``, which ``reads()`` leaves out: the cache would give the count of another query's row."""
    words = pc.list_value_length(pc.utf8_split_whitespace(table.column("query")))
    return set_column(table, "word_count", pc.add(table.column("word_count"), words.cast(pa.int32())))


def shouts_the_title(table: pa.Table) -> pa.Table:
    """Rewrites ``title``, which ``produces()`` does not declare: a cache hit would give the title as it went in."""
    return set_column(table, "title", pc.utf8_upper(table.column("title")))


def test_the_operator_as_it_is_passes_both_checks():
    contract = contract_of()
    contract.test_output_depends_only_on_the_columns_it_reads()
    contract.test_columns_it_changes_are_declared()


def test_an_output_that_depends_on_a_column_outside_reads_fails_naming_the_columns_read():
    with pytest.raises(AssertionError, match=r"\['word_count'\] changed with columns outside reads\(\) \['text'\]"):
        contract_of(counts_the_query_too).test_output_depends_only_on_the_columns_it_reads()


def test_a_column_rewritten_without_being_declared_fails_naming_it():
    with pytest.raises(AssertionError, match=r"rewrites \['title'\] without declaring them in produces\(\)"):
        contract_of(shouts_the_title).test_columns_it_changes_are_declared()


def reversed_rows(table: pa.Table) -> pa.Table:
    """Gives its rows back last first: the cache, which gives a row step's rows back in their input's order, would
    give another order on a hit (and on a miss, as it stores them)."""
    return table.take(pa.array(range(table.num_rows - 1, -1, -1)))


def counts_at_random(table: pa.Table) -> pa.Table:
    """A count that its input does not decide: cached, one run's numbers would be replayed as another's."""
    import random

    return set_column(table, "word_count", pa.array([random.randint(0, 10**9) for _ in range(table.num_rows)],
                                                    pa.int32()))


def test_a_row_step_that_reorders_its_rows_fails_and_is_refused_by_the_cache(tmp_path):
    with pytest.raises(AssertionError, match="reordered its rows: a row step keeps its input's order"):
        contract_of(reversed_rows).test_columns_it_changes_are_declared()
    from flows.cache import StepCache
    from flows.executors.local import LocalExecutor
    from tests.flows.ray_flows import flow_by_hand

    op = contract_of(reversed_rows).make_operator(input_column="query")
    flow = flow_by_hand("reversed", [("count", op, [])])
    queries = ["honey bees", "opera singers", "gothic cathedrals"]
    assert LocalExecutor(cache=None).run(flow, queries).table.num_rows == 3  # no cache: nothing to hold it to
    with pytest.raises(OperatorError, match="step 'count'.*a row step keeps its input's order .* and it reordered"):
        LocalExecutor(cache=StepCache(tmp_path / "cache")).run(flow, queries)


def test_a_row_step_whose_output_its_input_does_not_decide_fails_as_not_cacheable():
    with pytest.raises(AssertionError, match=r"\['word_count'\] changed between two runs on the same input: .*"
                                             r"set cacheable = False"):
        contract_of(counts_at_random).test_output_depends_only_on_the_columns_it_reads()


def test_an_operator_without_a_docstring_of_its_own_has_no_description_and_fails_the_contract():
    """``inspect.getdoc`` falls back to the base's docstring: such a reranker was described in ``tessera ops`` as
    ``Base of the rerankers ...`` and passed the contract's check that it has a description."""
    tfidf = get_operator("rerank.tfidf")
    base = tfidf.__mro__[1]

    class Undocumented(base):
        name = "mylab.undocumented"

    assert base.description() and Undocumented.description() == ""
    assert get_operator("analyze.word_count").description().startswith("Count the words of a text column")
    contract = contract_of()
    contract.operator_name = Undocumented.name
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("operators.testing.get_operator", lambda name: Undocumented)
        with pytest.raises(AssertionError, match="Undocumented needs a docstring"):
            contract.test_is_registered()


@pytest.mark.parametrize("extra, passes", [(None, True), ("forbid", True), ("allow", False), ("ignore", False)])
def test_params_that_leave_extra_unset_pass_as_the_run_refuses_their_unknown_params_too(extra, passes):
    """The run refuses an unknown param of a ``Params`` without ``extra`` as of one with ``extra="forbid"``; the
    contract failed the first."""
    word_count = get_operator("analyze.word_count")
    config = {} if extra is None else {"extra": extra}

    class Loose(word_count):
        """Counts words, with params of its own configuration."""

        class Params(BaseModel):
            model_config = ConfigDict(**config)
            input_column: str = Field("text", description="Column whose words are counted.")
            output_column: str = Field("word_count", description="Column that receives the count.")

    contract = contract_of()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("operators.testing.get_operator", lambda name: Loose)
        if passes:
            contract.test_params_schema_is_complete()
        else:
            with pytest.raises(AssertionError, match=f"must refuse unknown parameters.*not '{extra}'"):
                contract.test_params_schema_is_complete()
    if extra is None:
        with pytest.raises(ParamsError, match="colour"):
            Loose({"colour": "red"})


class QueryOverlap(Operator):
    """Count how many distinct words of the query occur in the text (docs/operators.md's example), as a chip."""

    name = "mylab.query_overlap"
    scope = "row"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")

    def reads(self) -> list[str]:
        return ["query", "text"]

    def produces(self) -> dict[str, str]:
        return {"overlap": "chip"}

    def transform(self, table: pa.Table) -> pa.Table:
        counts = [len(self.query_words(q) & _words(t))
                  for q, t in zip(table.column("query").to_pylist(), table.column("text").to_pylist())]
        return set_column(table, "overlap", pa.array(counts, pa.int32()))

    def query_words(self, query: str) -> set[str]:
        return _words(query)


def _words(text: str | None) -> set[str]:
    return set(re.findall(r"\w+", (text or "").lower()))


class QueryOverlapReadingTextOnly(QueryOverlap):
    """The example with ``query`` left out of ``reads()``, which ``transform`` reads all the same."""

    def reads(self) -> list[str]:
        return ["text"]


class FirstQueryWordOverlap(QueryOverlapReadingTextOnly):
    """Reads only the query's first word, so a word appended to the query changes nothing it sees."""

    def query_words(self, query: str) -> set[str]:
        return _words(query.split()[0]) if query.split() else set()


def contract_for(operator: type[Operator]) -> OperatorContract:
    class Contract(OperatorContract):
        operator_name = operator.name

        def make_operator(self, **params):
            return operator(params)

    return Contract()


def test_the_query_overlap_example_that_names_the_query_in_reads_passes():
    contract_for(QueryOverlap).test_output_depends_only_on_the_columns_it_reads()


@pytest.mark.parametrize("broken", [QueryOverlapReadingTextOnly, FirstQueryWordOverlap])
def test_an_operator_reading_the_query_outside_reads_fails_even_where_a_word_appended_would_not_show(broken):
    """The check appended the word "changed" to every value outside ``reads()``: both operators passed it, and the
    step cache then gave the query "bee" the overlap it had stored for "honey bee insects"."""
    with pytest.raises(AssertionError, match=r"\['overlap'\] changed with columns outside reads\(\) \['text'\]"):
        contract_for(broken).test_output_depends_only_on_the_columns_it_reads()


def test_a_role_no_flow_takes_fails_the_declared_outputs_check():
    """``produces()`` giving ``{"word_count": "count"}`` passed the contract, and every flow's build refused it."""
    word_count = get_operator("analyze.word_count")

    class OddRole(word_count):
        def produces(self):
            return {self.params.output_column: "count"}

    class Contract(OperatorContract):
        operator_name = "analyze.word_count"

        def make_operator(self, **params):
            return OddRole(params)

    with pytest.raises(AssertionError, match=r"produces\(\) gives \{'word_count': 'count'\}: a role is one of rank, "):
        Contract().test_declared_outputs_appear()
