"""What a flow author gets wrong, refused before anything runs with one line that says what to do: a plugin's
params without ``extra="forbid"``, no queries for a flow that reads them, a plugin operator whose plugin is not
loaded, an API key variable that is not set; and a Ray failure blamed on the stage that was running."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
import ray
from pydantic import BaseModel, ConfigDict

from flows.api import Flow
from flows.executors import make_executor
from flows.executors.base import RunState, as_queries
from flows.executors.ray_progress import RunFollower
from flows.model_check import MissingEnvError, check_env
from operators.base import Operator
from operators.errors import FlowCancelled, OperatorError, ParamsError, SpecError, UnknownOperatorError
from operators.registry import get_operator

CORPUS = [
    {"_id": "d1", "title": "Bee", "text": "Honey bees make honey from the nectar of flowers."},
    {"_id": "d2", "title": "Opera", "text": "An opera is a drama set to music, composed for singers."},
]


class LooseParams(BaseModel):
    keyword: str = "honey"


class LooseFlagger(Operator):
    """A plugin's operator whose Params leaves ``extra`` unset (pydantic then ignores unknown keys)."""

    name = "mylab.loose_flag"
    Params = LooseParams


class OpenFlagger(Operator):
    """An operator that takes any extra param on purpose."""

    name = "mylab.open_flag"

    class Params(BaseModel):
        model_config = ConfigDict(extra="allow")
        keyword: str = "honey"


def corpus_file(tmp_path: Path) -> str:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps(doc) + "\n" for doc in CORPUS))
    return str(path)


def test_a_misspelt_param_of_a_plugin_without_extra_forbid_is_refused_naming_it():
    with pytest.raises(ParamsError) as caught:
        LooseFlagger({"keywrd": "bee"}, step_id="flag")
    err = caught.value
    assert (err.step, err.op, err.field) == ("flag", "mylab.loose_flag", "params.keywrd")
    assert "unknown parameter" in err.message and "keyword" in err.message
    assert LooseFlagger({"keyword": "bee"}).params.keyword == "bee"
    assert OpenFlagger({"keyword": "bee", "colour": "red"}).params.model_extra == {"colour": "red"}


def test_no_queries_for_a_flow_that_reads_them_is_a_spec_error_naming_queries(tmp_path):
    flow = Flow.load({"name": "f", "steps": {"bm25": {"op": "retrieve.corpus_bm25",
                                                      "params": {"corpus": corpus_file(tmp_path), "k": 2}}}})
    with pytest.raises(SpecError) as caught:
        as_queries(None, flow.built)
    assert (caught.value.field, caught.value.step) == ("queries", "bm25")
    assert "queries is None" in caught.value.message
    assert as_queries(None).num_rows == 0  # without the flow (an executor's default): an empty input


def test_tessera_run_of_a_flow_that_starts_at_a_source_needs_no_queries(tmp_path, monkeypatch, capsys):
    """It was refused, "give the queries", though the flow reads none (``Flow.run`` took it without)."""
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    source = {"op": "sources.jsonl", "params": {"path": corpus_file(tmp_path)}}
    (tmp_path / "read.json").write_text(json.dumps({"name": "read", "steps": {
        "read": source, "words": {"op": "analyze.word_count"}}}))
    assert main(["run", str(tmp_path / "read.json"), "--json", "--no-cache"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows and all(row["word_count"] > 0 for row in rows)
    (tmp_path / "search.json").write_text(json.dumps({"name": "search", "steps": {"bm25": {
        "op": "retrieve.corpus_bm25", "params": {"corpus": corpus_file(tmp_path)}}}}))
    assert main(["run", str(tmp_path / "search.json")]) == 2
    assert "give the queries: --queries FILE_OR_TEXT" in capsys.readouterr().err


@pytest.mark.parametrize("queries, field, words", [
    ({"qid": ["1", "1"], "query": ["honey bees", "opera singers"]}, "queries.qid", "qid '1' appears twice"),
    ({"qid": ["1", "2"], "query": ["honey bees", "  "]}, "queries.query", "(qid '2') is empty"),
    ({"qid": ["1", "2"], "query": ["honey bees", None]}, "queries.query", "(qid '2') is empty"),
    ({"qid": ["1", "2"], "query": ["honey bees", "\u200b\ufeff\x01"]}, "queries.query", "(qid '2') is empty"),
    ({"qid": ["1", "2"], "query": ["honey bees", "\ufe0f\u034f\u3164\u2800"]}, "queries.query", "(qid '2') is empty"),
    ({"qid": ["1", ""], "query": ["honey bees", "opera singers"]}, "queries.qid", "qid of row 2 of 2 is empty"),
    ({"qid": [" ", "2"], "query": ["honey bees", "opera singers"]}, "queries.qid", "qid of row 1 of 2 is empty"),
    ({"qid": ["1", None], "query": ["honey bees", "opera singers"]}, "queries.qid", "qid of row 2 of 2 is empty"),
    # a results table (a row per document) whose qid holds two texts: the second was dropped without a word
    ({"qid": ["1", "1"], "query": ["honey bees", "opera singers"], "docno": ["d1", "d2"]}, "queries.qid",
     "qid '1' holds two different queries"),
], ids=["qid twice", "blank text", "null text", "invisible text", "blank-looking text", "empty qid", "blank qid",
        "null qid", "two texts of one qid"])
def test_a_queries_table_the_queries_files_would_refuse_is_refused_not_half_answered(tmp_path, queries, field, words):
    """A qid given twice lost its second query (one answer for two questions), and an empty text was answered with
    arbitrary documents by dense search: a table is refused as a queries file is."""
    import pyarrow as pa

    flow = Flow.load({"name": "f", "steps": {"bm25": {"op": "retrieve.corpus_bm25",
                                                      "params": {"corpus": corpus_file(tmp_path), "k": 2}}}})
    with pytest.raises(SpecError) as caught:
        flow.run(pa.table(queries))
    assert caught.value.field == field and words in caught.value.message
    results = pa.table({"qid": ["1", "1"], "query": ["honey bees"] * 2, "docno": ["d1", "d2"]})
    assert as_queries(results).num_rows == 2  # a results table for a reranking flow: a row per document


def test_a_query_with_a_lone_surrogate_is_refused_naming_it(tmp_path):
    """A lone surrogate (JSON's "\\ud800") cannot be UTF-8: a list of texts or a DataFrame holding one failed in
    Arrow with a bare UnicodeEncodeError naming neither the query nor the field."""
    import pandas as pd

    flow = Flow.load({"name": "f", "steps": {"bm25": {"op": "retrieve.corpus_bm25",
                                                      "params": {"corpus": corpus_file(tmp_path), "k": 2}}}})
    with pytest.raises(SpecError) as caught:
        flow.run(["honey bees", "opera \ud800"])
    assert caught.value.field == "queries"
    assert "query 2 of 2 holds a lone surrogate (\\ud800) at character 6" in caught.value.message
    frame = pd.DataFrame({"qid": ["a", "b"], "query": ["honey bees", "\udc00 opera"]}, dtype=object)
    with pytest.raises(SpecError) as caught:
        flow.run(frame)
    assert "the queries' query of row 2 holds a lone surrogate (\\udc00)" in caught.value.message


def test_a_source_only_flow_takes_no_queries(tmp_path):
    csv = tmp_path / "docs.csv"
    csv.write_text("_id,title,text\nd1,Bee,Honey bees\nd2,Opera,Singers\n")
    flow = Flow.load({"name": "read", "steps": {"read": {"op": "sources.csv", "params": {"path": str(csv)}}}})
    assert as_queries(None, flow.built).num_rows == 0
    result = make_executor("local").run(flow.built, None)
    assert result.table.column("docno").to_pylist() == ["d1", "d2"]


def test_an_unknown_operator_of_an_unknown_category_points_to_plugin_loading():
    with pytest.raises(UnknownOperatorError) as caught:
        get_operator("mylab.keyword_flag", step="flag")
    message = caught.value.message
    assert "TESSERA_OPERATORS" in message and "tessera.operators" in message and "docs/operators.md" in message
    assert "analyze.word_count" not in message  # not the list of every operator
    with pytest.raises(UnknownOperatorError) as caught:  # a known category: the close matches, no plugin hint
        get_operator("rerank.cross_encodr")
    assert "did you mean 'rerank.cross_encoder'" in caught.value.message
    assert "TESSERA_OPERATORS" not in caught.value.message


def reranked_flow(tmp_path: Path) -> Flow:
    return Flow.load({"name": "cohere", "steps": {
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": corpus_file(tmp_path), "k": 2}},
        "cohere": {"op": "rerank.api", "params": {"url": "https://api.cohere.com/v2/rerank", "model": "rerank-v3.5",
                                                   "api_key_env": "TESSERA_TEST_COHERE_KEY", "n": 2}}}})


def test_an_unset_api_key_variable_is_refused_before_any_step_runs(tmp_path, monkeypatch):
    monkeypatch.delenv("TESSERA_TEST_COHERE_KEY", raising=False)
    flow = reranked_flow(tmp_path)
    assert flow.built.operators["cohere"].required_env() == {"params.api_key_env": "TESSERA_TEST_COHERE_KEY"}
    events = []
    with pytest.raises(MissingEnvError) as caught:
        flow.run("honey bees", progress=events.append)
    with pytest.raises(MissingEnvError):  # the executors check it, whoever calls them
        make_executor("local").run(flow.built, "honey bees", progress=events.append)
    err = caught.value
    assert (err.step, err.field) == ("cohere", "steps.cohere.params.api_key_env")
    assert "$TESSERA_TEST_COHERE_KEY (step cohere, params.api_key_env)" in err.message
    assert events == []  # bm25 did not run
    monkeypatch.setenv("TESSERA_TEST_COHERE_KEY", "k-123")
    check_env(flow.built)  # set: nothing to refuse


def test_a_ray_failure_outside_any_operator_names_the_stage_being_run_not_the_last_that_reported(tmp_path):
    flow = Flow.load({"name": "f", "steps": {
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": corpus_file(tmp_path), "k": 2}},
        "count": {"op": "analyze.word_count"}}}).built
    follower = RunFollower(RunState(flow, "ray", cache=None, progress=None, cancel=None))
    follower.last_step, follower.current = "bm25", "count"  # bm25's batches reported; count's stage failed
    with pytest.raises(OperatorError) as caught:
        follower.raise_error(ray.exceptions.RaySystemError("System error: No module named 'mylab'"), None)
    assert caught.value.step == "count" and "No module named 'mylab'" in caught.value.message


def test_a_validators_own_message_reaches_the_author_without_pydantics_prefix():
    """A param validator's ``ValueError`` is already written for the user; pydantic puts "Value error, " before it,
    which the step's error (and the service's 422 built from it) dropped in some places and kept in others."""
    from pydantic import field_validator

    class EvenParams(BaseModel):
        model_config = ConfigDict(extra="forbid")
        n: int = 2

        @field_validator("n")
        @classmethod
        def _even(cls, value: int) -> int:
            if value % 2:
                raise ValueError("n must be even")
            return value

    class Evens(Operator):
        """Takes an even number."""

        name = "mylab.evens"
        Params = EvenParams

    with pytest.raises(ParamsError) as caught:
        Evens({"n": 3}, step_id="e")
    assert caught.value.message.startswith("n must be even") and caught.value.field == "params.n"


def test_a_sources_documents_fanned_in_with_a_query_steps_rows_are_refused_naming_the_step(tmp_path):
    """A source's rows (no qid) in a fan-in before a step that works per query failed in numpy ("'<' not supported
    between instances of 'NoneType'"), an internal error that named no step."""
    from operators.errors import MissingColumnsError

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(doc) + "\n" for doc in CORPUS), encoding="utf-8")
    import pyarrow as pa

    from flows.spec import FlowSpec

    spec = FlowSpec.parse({"name": "mixed", "steps": {
        "docs": {"op": "sources.jsonl", "params": {"path": str(corpus)}},
        "words": {"op": "analyze.word_count", "inputs": []},
        "top": {"op": "postprocess.reduce", "params": {"k": 1}, "inputs": ["docs", "words"]}}})
    results = [{"qid": "q1", "query": "honey", "docno": "d1", "text": "honey bees", "score": 1.0, "rank": 1}]
    with pytest.raises(MissingColumnsError) as err:
        make_executor("local").run(spec, pa.Table.from_pylist(results))
    assert (err.value.step, err.value.op, err.value.field) == ("top", "postprocess.reduce", "qid")
    assert "2 of 3 rows have no qid" in err.value.message


DECLARING = '''
import pyarrow as pa
from operators.base import Operator


class Flagger(Operator):
    """Flags every row."""

    name = "mylab.flag"

    def reads(self):
        return READS

    def produces(self):
        return PRODUCES

    def transform(self, table):
        return table.append_column("flag", pa.array([True] * table.num_rows))
'''


@pytest.mark.parametrize("reads, produces, words", [
    ('["text"]', '["flag"]', "its produces() returned ['flag'], not a dict {column: role} (roles: rank, score, "),
    ('["text"]', '{"flag": "flag"}', "its produces() gives column 'flag' the role 'flag', which is none of rank, "),
    ('"text"', '{"flag": "chip"}', "its reads() returned 'text', not a list of column names (None: every column)"),
    ('["text"]', '{"flag": chip}', "its produces() failed: NameError: name 'chip' is not defined"),
], ids=["produces a list", "an unknown role", "reads a text", "produces raises"])
def test_a_plugins_declared_columns_the_engine_cannot_read_are_refused_naming_the_step(plugin_module, reads, produces,
                                                                                       words):
    """A list for produces() failed in the build with a bare AttributeError ('list' object has no attribute
    'items'); a text for reads() was read as the columns t, e, x, t; a role that is none passed unseen."""
    from flows.spec import FlowSpec

    plugin_module("declaring", DECLARING.replace("READS", reads).replace("PRODUCES", produces))
    spec = FlowSpec.parse({"name": "f", "steps": {"words": {"op": "analyze.word_count"}, "x": {"op": "mylab.flag"}}})
    with pytest.raises(OperatorError) as caught:
        spec.build()
    assert (caught.value.step, caught.value.op) == ("x", "mylab.flag")
    assert caught.value.message.startswith(words), caught.value.message


@pytest.mark.parametrize("init", ["(self, params)", "(self, params=None, *, step_id=None)"])
def test_a_plugin_whose_init_does_not_take_what_the_executors_pass_is_refused_as_it_registers(plugin_module, init):
    """An ``__init__(self, params)`` override was a bare TypeError from the build, naming no step; one that takes
    ``step_id`` too failed every build as ``unexpected keyword argument 'input_steps'``, an argument no page names.
    Both are refused as the plugin registers, naming the class and how to write it."""
    from flows.spec import FlowSpec
    from operators.plugins import OperatorPluginError

    module = plugin_module("own_init", DECLARING.replace("READS", '["text"]').replace("PRODUCES", '{"flag": "chip"}')
                           + f"\n    def __init__{init}:\n        super().__init__(params)\n")
    with pytest.raises(OperatorPluginError) as caught:
        FlowSpec.parse({"name": "f", "steps": {"x": {"op": "mylab.flag"}}}).build()
    message = caught.value.message
    assert message.startswith(f"operator plugin TESSERA_OPERATORS module '{module}': {module}.")
    assert f"(mylab.flag): its __init__{init.replace('self, ', '')} cannot take what the executors pass" in message
    assert message.endswith("write def __init__(self, *args, **kwargs) calling super().__init__(*args, **kwargs), "
                            "or load state in setup()")


@pytest.mark.parametrize("queries, said", [
    ([None], "query 1 of 1 is None, not text: each query is the text to search for (a str); queries must be one "
     "text, a list of texts"),
    (["honey bees", b"opera"], "query 2 of 2 is b'opera' (bytes), not text: each query is the text to search for"),
    (("honey bees", ["opera"]), "query 2 of 2 is ['opera'] (list), not text"),
])
def test_a_query_that_is_not_text_is_named_by_its_position_in_python_words(queries, said):
    """``Flow.run([None])`` said "query 1 of 1 is NoneType None", Python's name of the type beside the value."""
    with pytest.raises(SpecError) as caught:
        as_queries(queries)
    assert caught.value.field == "queries" and caught.value.message.startswith(said), caught.value.message
    assert "NoneType" not in caught.value.message


TYPED_PER_BATCH = '''
import pyarrow as pa
from operators.base import Operator


class Flagger(Operator):
    """Flags every row: with numbers in the batch holding query 1, with text in the others."""

    name = "mylab.flag"
    batch_size = 1

    def produces(self):
        return {"flag": "chip"}

    def transform(self, table):
        numbers = "1" in table.column("qid").to_pylist()
        return table.append_column("flag", pa.array([1 if numbers else "x"] * table.num_rows))
'''
UNJOINABLE = ("its outputs of different batches cannot be joined into one table (Unable to merge: Field flag has "
              "incompatible types: int64 vs string): transform must give every batch the same column types")


def _unjoinable_flow(plugin_module):
    plugin_module("typed", TYPED_PER_BATCH)
    return Flow.load({"name": "f", "steps": {"x": {"op": "mylab.flag"}, "words": {
        "op": "analyze.word_count", "params": {"input_column": "query"}, "inputs": ["x"]}}}).built


def test_a_plugin_whose_output_types_differ_per_batch_is_named_locally(plugin_module):
    """The local executor's join of the batches failed as `internal error: ArrowTypeError`, exit status 1."""
    with pytest.raises(OperatorError) as caught:
        make_executor("local").run(_unjoinable_flow(plugin_module), ["honey bees", "opera singers"])
    assert (caught.value.step, caught.value.op, caught.value.message) == ("x", "mylab.flag", UNJOINABLE)


def _ray_join_failure() -> BaseException:
    """What the Ray executor's worker thread gets when a task's block builder cannot join the step's outputs."""
    from ray.data._internal.tensor_extensions.arrow import ArrowConversionError

    cause = ArrowConversionError("Failed to unify schemas: Unable to merge: Field flag has incompatible types: "
                                 "int64 vs string\n----------------\nSchemas:\n[qid: string")
    failed = ray.exceptions.RayTaskError("MapBatches(run_as_task)", f"Traceback ...\n{cause}", cause)
    return failed.as_instanceof_cause()


@pytest.mark.parametrize("error", [
    _ray_join_failure,
    lambda: pa.ArrowTypeError("Unable to merge: Field flag has incompatible types: int64 vs string"),
], ids=["in a task's block", "in the driver's collect"])
def test_a_plugin_whose_output_types_differ_per_batch_is_named_on_ray_as_locally(plugin_module, error):
    """Ray said `step 'words': failed on Ray: ArrowConversionError: Error converting data to Arrow: ...` (the stage
    being run, no operator), or, joined on the driver, `internal error: ArrowTypeError`."""
    follower = RunFollower(RunState(_unjoinable_flow(plugin_module), "ray", cache=None, progress=None,
                                    cancel=None))
    follower.last_step = follower.current = "words"  # the column's step is named, not the stage it streams into
    with pytest.raises(OperatorError) as caught:
        follower.raise_error(error(), None)
    assert (caught.value.step, caught.value.op, caught.value.message) == ("x", "mylab.flag", UNJOINABLE)


def test_a_ray_run_cancelled_in_a_slow_step_names_it_not_the_step_before_that_reported(tmp_path):
    """Ctrl-C during a plugin's slow first batch said `cancelled: step 'bm25'` (the last step whose batch reported;
    the local executor names the slow one), as the workers' stops do not reach a batch that never returns."""
    from flows.progress import CancelToken
    from flows.runner import BatchStats

    flow = Flow.load({"name": "f", "steps": {
        "bm25": {"op": "retrieve.corpus_bm25", "params": {"corpus": corpus_file(tmp_path), "k": 2}},
        "count": {"op": "analyze.word_count"}}}).built
    cancel = CancelToken()
    follower = RunFollower(RunState(flow, "ray", cache=None, progress=None, cancel=cancel))
    follower.take([("start", "bm25", None), ("start", "count", None), ("batch", "bm25", BatchStats(rows_out=2))])
    cancel.cancel("interrupted (Ctrl-C)")
    with pytest.raises(FlowCancelled) as caught:
        follower.raise_error(RuntimeError("stopped"), None)
    assert (caught.value.step, caught.value.message) == ("count", "interrupted (Ctrl-C)")
