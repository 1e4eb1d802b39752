"""What ``Operator.check_output`` keeps of the long tables' data model (``operators/output_checks.py``): the
``qid`` column, the types of the core columns a step writes, and, in query scope, only the qids the step was given.
Without these checks a plugin's broken output ran on silently (integer qids shown as other queries, rows for a
query nobody asked) or failed in the next step, which was then blamed.

The broken operators are a real plugin package in ``tmp_path``, registered through ``TESSERA_OPERATORS``, run
in-process and in a flow over a real BM25 retriever (as ``test_operator_output`` does)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.errors import OperatorError
from operators.registry import create
from operators.testing import sample_results
from tests.operators.test_operator_output import flow
from tests.operators.test_plugins import fresh_registry, load_plugin  # noqa: F401 - a fixture

BROKEN = '''\
"""Operators whose output breaks the data model the way a first plugin does."""

from __future__ import annotations

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.tables import concat, qid_groups, ranking_columns, set_column


class QidDropper(Operator):
    """Keep only the text of each row."""

    name = "mylab.qid_dropper"
    scope = "query"

    def transform(self, table: pa.Table) -> pa.Table:
        return table.select(["docno", "text"])


class Renumberer(Operator):
    """Write rank (or qid) from a plain Python list: int64, not the data model's type."""

    name = "mylab.renumber"
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        column: str = Field("rank", description="The column written.")

    def transform(self, table: pa.Table) -> pa.Table:
        return set_column(table, self.params.column, pa.array(list(range(1, table.num_rows + 1))))


class Enumerator(Operator):
    """Reverse each query's rows and rank them with enumerate, from 0 (or from 1, as the data model has it)."""

    name = "mylab.enumerate"
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        start: int = Field(0, description="The first rank.")

    def produces(self) -> dict[str, str]:
        return ranking_columns(self.step_id)

    def transform(self, table: pa.Table) -> pa.Table:
        groups = []
        for _, rows in qid_groups(table):
            rows = rows.take(pa.array(range(rows.num_rows - 1, -1, -1)))
            ranks = pa.array([i for i, _ in enumerate(range(rows.num_rows), start=self.params.start)], pa.int32())
            scores = pa.array([float(rows.num_rows - i) for i in range(rows.num_rows)], pa.float64())
            for name, values in (("score", scores), ("rank", ranks), (f"score_{self.step_id}", scores),
                                 (f"rank_{self.step_id}", ranks)):
                rows = set_column(rows, name, values)
            groups.append(rows)
        return concat(groups) if groups else table


class ModelScorer(Operator):
    """Write a model's number per row in a column declared as a score (or a rank): the score as the model's reply
    text, the rank as Python floats."""

    name = "mylab.model_score"
    scope = "query"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        role: str = Field("score", description="The role of the column written, model_<role>.")

    def produces(self) -> dict[str, str]:
        return {f"model_{self.params.role}": self.params.role}

    def transform(self, table: pa.Table) -> pa.Table:
        n = table.num_rows
        values = [f"0.{93 - i}" for i in range(n)] if self.params.role == "score" else [i + 1.0 for i in range(n)]
        return set_column(table, f"model_{self.params.role}", pa.array(values))


class Inventor(Operator):
    """Add a row for a query it was not given (or, in row scope, a new query as query.expand does)."""

    name = "mylab.inventor"
    scope = "query"

    def transform(self, table: pa.Table) -> pa.Table:
        if table.num_rows == 0:
            return table
        row = table.slice(0, 1).to_pylist()[0]
        return pa.concat_tables([table, pa.Table.from_pylist([{**row, "qid": "other"}], schema=table.schema)])


class RowInventor(Inventor):
    """The same rows from a row-scope step: a new query, which row scope may add."""

    name = "mylab.row_inventor"
    scope = "row"
'''


@pytest.fixture
def broken(tmp_path, monkeypatch, fresh_registry):  # noqa: F811 - the imported fixture
    load_plugin(tmp_path, monkeypatch, {"model": BROKEN}, "model")


def test_a_step_that_drops_qid_is_named_not_the_step_after_it(broken, tmp_path):
    with pytest.raises(OperatorError, match="transform dropped the 'qid' column") as err:
        flow(tmp_path, ("texts", "mylab.qid_dropper", {}), ("top", "postprocess.reduce", {"k": 1})).run("honey")
    assert (err.value.step, err.value.op) == ("texts", "mylab.qid_dropper")
    from operators.output_checks import output_breach

    tagged = pa.table({"qid": ["1"], "docno": ["d1"], "__tessera_row": [0]})  # the cache's row tag: not the step's
    said = output_breach("row", {}, tagged, tagged.drop_columns(["qid"]))
    assert said.startswith("transform dropped the 'qid' column (output has docno);"), said
    documents = pa.table({"docno": ["d1"], "text": ["no qid here"]})  # a table without qid may stay without
    assert create("mylab.qid_dropper", {})(documents).column_names == ["docno", "text"]


@pytest.mark.parametrize(("column", "expected"), [("rank", "int32"), ("qid", "string")])
def test_a_core_column_written_with_another_type_is_an_error_naming_it(broken, tmp_path, column, expected):
    said = rf"'{column}' is int64, expected {expected}; write it as pa.array\(values, pa.{expected}\(\)\)"
    with pytest.raises(OperatorError, match=said) as err:
        flow(tmp_path, ("renumber", "mylab.renumber", {"column": column})).run(["honey bees", "opera"])
    assert (err.value.step, err.value.op) == ("renumber", "mylab.renumber")


def test_a_column_passed_through_as_it_came_is_not_refused(broken):
    """The check is of what a step writes: an int64 rank that came in (a caller's table) passes a step that
    leaves it, and a step that writes it int64 over int64 changes nothing."""
    given = sample_results(1, 3)
    given = given.set_column(given.column_names.index("rank"), "rank", given.column("rank").cast(pa.int64()))
    assert create("analyze.word_count", {})(given).schema.field("rank").type == pa.int64()
    assert create("mylab.renumber", {})(given).column("rank").to_pylist() == [1, 2, 3]


def test_a_query_step_that_adds_rows_for_another_qid_is_an_error_and_a_row_step_may(broken, tmp_path):
    with pytest.raises(OperatorError, match=r"returned rows for 1 qid\(s\) it was not given \('other'\)") as err:
        flow(tmp_path, ("invent", "mylab.inventor", {})).run("honey bees")
    assert (err.value.step, err.value.op) == ("invent", "mylab.inventor")
    out = create("mylab.row_inventor", {})(sample_results(1, 2))
    assert out.column("qid").to_pylist() == ["q1", "q1", "other"]


def test_ranks_numbered_from_0_are_an_error_saying_they_start_at_1(broken, tmp_path):
    """``tessera run`` showed rank 0, and a step after it that reduces or fuses by rank took it for the best."""
    with pytest.raises(OperatorError) as err:
        flow(tmp_path, ("flip", "mylab.enumerate", {})).run(["honey bees", "opera"])
    assert (err.value.step, err.value.op) == ("flip", "mylab.enumerate")
    assert err.value.message == ("transform wrote 'rank' 0: ranks start at 1 within each qid (enumerate(rows, "
                                 "start=1)); operators.tables.set_ranking numbers them")
    flipped = flow(tmp_path, ("flip", "mylab.enumerate", {"start": 1})).run(["honey bees", "opera"])
    assert flipped.table.column("rank").to_pylist() == [1, 2, 1]  # opera finds one document


@pytest.mark.parametrize("role, written, expected", [
    ("score", "string ('0.93')", "double (numbers as text sort '10' before '9'); write it as pa.array(values, "
                                 "pa.float64())"),
    ("rank", "double (1.0)", "int32; write it as pa.array(values, pa.int32())")])
def test_a_column_declared_as_a_score_or_rank_written_as_text_or_floats_is_an_error_naming_it(broken, tmp_path, role,
                                                                                             written, expected):
    """A score column of the step's own name, written as text, ran on: postprocess.reduce by it kept '0.92' over
    '0.100', a sort by text. It is refused at the step that wrote it, with the type and how to write it."""
    with pytest.raises(OperatorError) as err:
        flow(tmp_path, ("model", "mylab.model_score", {"role": role}),
             ("top", "postprocess.reduce", {"k": 1, "rank_column": f"model_{role}"})).run(["honey bees", "opera"])
    assert (err.value.step, err.value.op) == ("model", "mylab.model_score")
    assert err.value.message == (f"transform wrote a column of another type than the data model's: 'model_{role}' "
                                 f"(declared with the role '{role}') is {written}, expected {expected}")
