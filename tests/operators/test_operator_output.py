"""What ``Operator.__call__`` checks of ``transform``'s output, in-process and in a flow (``operators/base.py``):
a pyarrow Table, every column ``produces()`` declares, and for a row-scope step at least one row per input row;
and a failure of ``setup`` names its step as one of ``transform`` does.

The broken operators are a real plugin package written into ``tmp_path`` and registered through
``TESSERA_OPERATORS`` (as ``test_plugins`` does), run over real sample text and a real BM25 retriever."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.errors import OperatorError
from operators.registry import create
from operators.testing import sample_documents, sample_results
from tests.operators.test_plugins import CORPUS, fresh_registry, load_plugin  # noqa: F401 - a fixture

BROKEN = '''\
"""Operators that break the contract the way a notebook user's first try does."""

from __future__ import annotations

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.tables import set_column


class DataFrameMaker(Operator):
    """Return a pandas DataFrame instead of a pyarrow Table."""

    name = "mylab.data_frame"

    def transform(self, table: pa.Table):
        return table.to_pandas()


class Tagger(Operator):
    """Declare a tag column, and write it only when told to."""

    name = "mylab.tagger"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        write: bool = Field(True, description="Write the declared column.")

    def produces(self) -> dict[str, str]:
        return {"tag": "chip"}

    def transform(self, table: pa.Table) -> pa.Table:
        if not self.params.write:
            return table
        return set_column(table, "tag", pa.array(["t"] * table.num_rows, pa.string()))


class FirstRowKeeper(Operator):
    """Keep the first row of each batch: a filter written in row scope."""

    name = "mylab.first_row"

    def transform(self, table: pa.Table) -> pa.Table:
        return table.slice(0, 1)


class Narrower(Operator):
    """Keep only the ranking columns of each query's rows (drops the columns other steps wrote)."""

    name = "mylab.narrower"
    scope = "query"

    def transform(self, table: pa.Table) -> pa.Table:
        return table.select(["qid", "query", "docno", "score", "rank"])


class Returner(Operator):
    """Return what a first try returns in place of a table."""

    name = "mylab.returner"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        what: str = Field(description="What transform returns: none, rows, batch or column.")

    def transform(self, table: pa.Table):
        if self.params.what == "none":
            table.append_column("tag", pa.array(["t"] * table.num_rows))  # the return forgotten
        elif self.params.what == "rows":
            return table.to_pylist()
        elif self.params.what == "batch":
            return table.to_batches()[0]
        elif self.params.what == "column":
            return table.column("text")


class Appender(Operator):
    """Write a column with append_column, where set_column was meant: the input has it already."""

    name = "mylab.appender"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        column: str = Field("title", description="The column appended.")

    def produces(self) -> dict[str, str]:
        return {self.params.column: "data"}

    def transform(self, table: pa.Table) -> pa.Table:
        return table.append_column(self.params.column, pa.array(["t"] * table.num_rows, pa.string()))


class Yielder(Operator):
    """Yield the table, as a source's read does."""

    name = "mylab.yielder"

    def transform(self, table: pa.Table):
        yield table


class CorruptModel(Operator):
    """Load a model that turns out to be corrupt: a library's own error, raised in setup."""

    name = "mylab.corrupt_model"

    def setup(self) -> None:
        raise ValueError("model file is corrupt")

    def transform(self, table: pa.Table) -> pa.Table:
        return table
'''


@pytest.fixture
def broken(tmp_path, monkeypatch, fresh_registry):  # noqa: F811 - the imported fixture
    """The module of broken operators, registered through ``TESSERA_OPERATORS``."""
    load_plugin(tmp_path, monkeypatch, {"broken": BROKEN}, "broken")


def flow(tmp_path, *steps: tuple[str, str, dict]):
    """A flow: BM25 over the three-document corpus (top 2 per query), then ``steps`` (id, op, params)."""
    import json

    from flows.api import Flow

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(doc) + "\n" for doc in CORPUS))
    spec = {"bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(corpus), "k": 2}}}
    spec.update({step: {"op": op, "params": params} for step, op, params in steps})
    return Flow.load({"name": "checked", "steps": spec})


def test_a_data_frame_is_an_operator_error_naming_the_step_in_process_and_in_a_flow(broken, tmp_path):
    with pytest.raises(OperatorError, match="transform returned a DataFrame, not a pyarrow Table") as err:
        create("mylab.data_frame", {})(sample_results(1, 2))
    assert (err.value.step, err.value.op) == ("data_frame", "mylab.data_frame")
    with pytest.raises(OperatorError, match="transform returned a DataFrame, not a pyarrow Table") as err:
        flow(tmp_path, ("frame", "mylab.data_frame", {})).run("honey bees")
    assert (err.value.step, err.value.op) == ("frame", "mylab.data_frame")


@pytest.mark.parametrize("what, said", [
    ("none", "transform returned None, not a pyarrow Table (transform returns the table it made: is its return "
             "missing?)"),
    ("rows", "transform returned a list, not a pyarrow Table (pa.Table.from_pylist(rows) makes one of a list of "
             "row dicts)"),
    ("batch", "transform returned a RecordBatch, not a pyarrow Table (pa.Table.from_batches([batch]) makes one of "
              "it)"),
    ("column", "transform returned a ChunkedArray, not a pyarrow Table (that is one column: "
               "operators.tables.set_column(table, name, values) adds it to the table)"),
    (None, "transform returned a generator, not a pyarrow Table (transform yields: it returns one table; only a "
              "source's read(split) yields tables)"),
])
def test_what_a_first_try_returns_in_place_of_a_table_is_named_with_how_to_make_one(broken, tmp_path, what, said):
    op, params = ("mylab.returner", {"what": what}) if what else ("mylab.yielder", {})
    with pytest.raises(OperatorError) as err:
        flow(tmp_path, ("tag", op, params)).run("honey bees")
    assert (err.value.step, err.value.op, err.value.message) == ("tag", op, said)


@pytest.mark.parametrize("column", ["title", "text"])
@pytest.mark.parametrize("cache", [False, True], ids=["no cache", "step cache"])
def test_a_column_appended_beside_one_of_its_name_is_an_error_saying_set_column(broken, tmp_path, column, cache):
    """Before, the result held two such columns (printing it, or a run with the cache, was an internal KeyError,
    'Field "title" exists 2 times in schema'; --out wrote both)."""
    appending = flow(tmp_path, ("tag", "mylab.appender", {"column": column}))
    with pytest.raises(OperatorError) as err:
        appending.run("honey bees", cache=tmp_path / "cache" if cache else False)
    assert (err.value.step, err.value.op) == ("tag", "mylab.appender")
    assert err.value.message == (f"transform returned column(s) '{column}' more than once: table.append_column adds "
                                 "a column beside the one of that name; operators.tables.set_column(table, name, "
                                 "values) replaces it")


def test_a_setup_that_fails_is_an_operator_error_naming_the_step_in_process_and_in_a_flow(broken, tmp_path):
    with pytest.raises(OperatorError, match="its setup failed: ValueError: model file is corrupt") as err:
        create("mylab.corrupt_model", {})(sample_results(1, 2))
    assert (err.value.step, err.value.op) == ("corrupt_model", "mylab.corrupt_model")
    assert isinstance(err.value.__cause__, ValueError)
    with pytest.raises(OperatorError, match="model file is corrupt") as err:
        flow(tmp_path, ("model", "mylab.corrupt_model", {})).run("honey bees")
    assert (err.value.step, err.value.op) == ("model", "mylab.corrupt_model")


@pytest.mark.parametrize("cache", [False, True], ids=["no cache", "step cache"])
def test_a_declared_column_not_written_is_an_error_naming_it(broken, tmp_path, cache):
    checked = flow(tmp_path, ("tag", "mylab.tagger", {"write": False}))
    with pytest.raises(OperatorError, match=r"did not write declared column\(s\) tag \(") as err:
        checked.run("honey bees", cache=tmp_path / "cache" if cache else False)
    assert (err.value.step, err.value.op) == ("tag", "mylab.tagger")
    assert "__tessera" not in str(err.value)  # the step cache's row numbers are the executor's, not the step's
    with pytest.raises(OperatorError, match=r"declared column\(s\) tag \("):
        create("mylab.tagger", {"write": False})(sample_results(1, 2))
    written = flow(tmp_path, ("tag", "mylab.tagger", {})).run("honey bees", cache=tmp_path / "c2" if cache else False)
    assert written.table.column("tag").to_pylist() == ["t", "t"] and written.roles["tag"] == "chip"


def test_a_row_step_that_drops_rows_is_an_error_and_one_that_adds_rows_is_not(broken, tmp_path):
    with pytest.raises(OperatorError, match=r"one or more output rows per input row; transform returned 1 row\(s\) "
                                            r"for 3") as err:
        create("mylab.first_row", {})(sample_results(1, 3))
    assert err.value.step == "first_row"
    with pytest.raises(OperatorError, match="returned 1 row") as err:
        flow(tmp_path, ("first", "mylab.first_row", {})).run("honey bees")
    assert err.value.step == "first"
    assert create("mylab.first_row", {})(sample_results(1, 1)).num_rows == 1  # one row in, one out: kept
    docs = sample_documents(3)
    chunks = create("preprocess.chunk", {"unit": "words", "size": 20, "overlap": 0})(docs)  # more rows: fine
    assert chunks.num_rows > docs.num_rows and set(chunks.column("doc_id").to_pylist()) == set(
        docs.column("docno").to_pylist())


def test_built_in_row_steps_write_their_declared_columns_on_an_empty_table():
    """An empty batch reaches a step (a query with no hits, a cache-hit run's schema call): the declared columns
    are written, typed and empty, so the check holds there too."""
    empty = sample_documents(2).slice(0, 0)
    for op in ("preprocess.chunk", "analyze.word_count"):
        out = create(op, {})(empty)
        assert out.num_rows == 0 and set(create(op, {}).produces()) <= set(out.column_names), op


def test_roles_list_only_the_columns_the_result_has(broken, tmp_path):
    checked = flow(tmp_path, ("words", "analyze.word_count", {}), ("narrow", "mylab.narrower", {}))
    assert checked.built.roles()["word_count"] == "chip"  # declared by a step the output depends on
    result = checked.run(["honey bees", "opera"])
    assert result.table.column_names == ["qid", "query", "docno", "score", "rank"]
    assert set(result.roles) == {"docno", "score", "rank"} <= set(result.table.column_names)
    assert result.roles["rank"] == "rank"


def test_an_operator_that_keeps_the_contract_returns_its_table_unchanged():
    table = pa.table({"docno": ["d1", "d2"], "text": ["two words", "three more words"]})
    out = create("analyze.word_count", {})(table)
    assert out.column("word_count").to_pylist() == [2, 3] and out.column("docno").to_pylist() == ["d1", "d2"]


def test_a_source_that_reads_an_empty_file_returns_an_empty_table(tmp_path):
    """The one exception to the declared-columns check: a source that read nothing has no rows and no schema."""
    (tmp_path / "empty.jsonl").write_text("")
    out = create("sources.jsonl", {"path": str(tmp_path / "empty.jsonl")})(pa.table({}))
    assert out.num_rows == 0
    (tmp_path / "one.jsonl").write_text('{"_id": "d1", "text": "Honey bees."}\n')
    one = create("sources.jsonl", {"path": str(tmp_path / "one.jsonl")})(pa.table({}))
    assert one.select(["docno", "text"]).to_pylist() == [{"docno": "d1", "text": "Honey bees."}]
