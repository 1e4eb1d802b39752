"""Checks across steps made when a flow is built (flows/spec_checks.py): fusion branches, input columns, fan-ins,
step ids; and what a spec file may hold (params left empty, YAML booleans, the file named in errors)."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from flows.executors.local import LocalExecutor
from flows.spec import FlowSpec
from operators.errors import ParamsError, SpecError
from operators.testing import sample_documents
from tests.conftest import bm25_sample_index

HYBRID = {
    "bm25": {"op": "retrieve.bm25", "params": {"k": 20}},
    "dense": {"op": "retrieve.dense", "params": {"k": 20}, "inputs": []},
    "fused": {"op": "fuse.rrf", "inputs": ["bm25", "dense"]},
    "rr": {"op": "rerank.tfidf", "params": {"n": 10}},
}


def build(steps: dict, **spec) -> object:
    return FlowSpec.parse({"steps": steps, **spec}).build()


@pytest.fixture(scope="module")
def bm25_index(tmp_path_factory):
    return bm25_sample_index(tmp_path_factory.mktemp("spec_checks") / "index", 50)


# -- fusion branches -------------------------------------------------------------------------


def test_a_branch_that_is_not_a_step_is_refused_when_the_flow_is_built():
    with pytest.raises(SpecError) as err:
        build({**HYBRID, "final": {"op": "fuse.weighted", "inputs": ["fused", "rr"],
                                   "params": {"branches": ["fused", "nope"]}}})
    assert err.value.field == "steps.final.params.branches" and "'nope'" in err.value.message


def test_weights_naming_a_step_that_is_not_a_branch_are_refused_when_built():
    with pytest.raises(ParamsError) as err:
        build({**HYBRID, "final": {"op": "fuse.weighted", "inputs": ["fused", "rr"],
                                   "params": {"weights": {"fusd": 1.0, "rr": 2.0}}}})
    assert err.value.field == "steps.final.params.weights" and "fusd" in err.value.message


def test_a_branch_that_does_not_rank_or_is_not_above_the_step_is_refused():
    with pytest.raises(SpecError, match="branch 'wc' .* does not rank.*above this step: bm25, dense") as err:
        build({"bm25": {"op": "retrieve.bm25"}, "wc": {"op": "analyze.word_count"},
               "dense": {"op": "retrieve.dense", "inputs": []}, "fused": {"op": "fuse.rrf", "inputs": ["wc", "dense"]}})
    assert err.value.field == "steps.fused.inputs"
    with pytest.raises(SpecError, match="'dense', which is not above this step") as err:
        build({"dense": {"op": "retrieve.dense", "inputs": []}, "bm25": {"op": "retrieve.bm25", "inputs": []},
               "fused": {"op": "fuse.rrf", "inputs": ["bm25"], "params": {"branches": ["bm25", "dense"]}}},
              output="fused")
    assert err.value.field == "steps.fused.params.branches"


def test_a_branch_behind_a_retriever_is_refused_and_the_same_steps_fanned_in_build():
    """bm25 -> dense -> fuse.rrf(branches: bm25, dense): dense searches from the queries alone, so its rows hold no
    bm25 ranking; they had carried bm25's best row's rank_bm25 onto every dense hit, fused as a tie of firsts."""
    linear = {"bm25": {"op": "retrieve.bm25", "params": {"k": 10}}, "dense": {"op": "retrieve.dense"},
              "fused": {"op": "fuse.rrf", "params": {"branches": ["bm25", "dense"]}}}
    with pytest.raises(SpecError, match=r"'bm25', whose ranking does not reach this step: 'dense' \(retrieve.dense\)"
                                        r".*inputs: \[bm25, dense\]") as err:
        build(linear)
    assert err.value.field == "steps.fused.params.branches"
    build({**linear, "fused": {"op": "fuse.rrf", "inputs": ["bm25", "dense"]}})  # the fan-in it advises
    build({**HYBRID, "final": {"op": "fuse.rrf", "params": {"branches": ["fused", "rr"]}}})  # a reranker passes rows


def test_a_step_that_writes_another_steps_ranking_column_is_refused_naming_its_param():
    """word_count's output_column: rank_bm25 gave the fusion after it word counts for bm25's ranks, silently."""
    with pytest.raises(SpecError, match="writes column 'rank_bm25', which holds step 'bm25's ranking") as err:
        build({**HYBRID, "wc": {"op": "analyze.word_count", "params": {"output_column": "rank_bm25"}},
               "final": {"op": "fuse.rrf", "params": {"branches": ["fused", "rr"]}}})
    assert (err.value.step, err.value.field) == ("wc", "steps.wc.params.output_column")
    build({**HYBRID, "wc": {"op": "analyze.word_count", "params": {"output_column": "rank_words"}}})  # no such step


def test_a_column_no_param_names_is_refused_with_the_step_to_rename():
    """retrieve.multi_hop always writes score_dense: the advice "give its output another name" could not be
    followed, as no param of it names that column; renaming the other step can."""
    steps = {"dense": {"op": "retrieve.dense"}, "mh": {"op": "retrieve.multi_hop", "inputs": []},
             "both": {"op": "fuse.rrf", "inputs": ["dense", "mh"]}}
    with pytest.raises(SpecError, match="writes column 'score_dense', which holds step 'dense's ranking .*; rename "
                                        "step 'dense'") as err:
        build(steps)
    assert (err.value.step, err.value.field) == ("mh", "steps.mh.op")
    build({"semantic": steps["dense"], "mh": steps["mh"], "both": {"op": "fuse.rrf", "inputs": ["semantic", "mh"]}})


@pytest.mark.parametrize("op, params, column", [
    ("summarize.documents", {"output_column": "qid"}, "qid"),  # failed at run time: "rows for 1 qid(s) it was not
    ("analyze.relevance_marking", {"output_column": "docno"}, "docno"),  # given"; a marking replaced document ids
    ("analyze.word_count", {"output_column": "docno"}, "docno"),
    # word counts as ranks (reduce kept the top k by them) or as document ids (a TREC run of counts): the run went on
    ("analyze.word_count", {"output_column": "rank"}, "rank"),
    ("analyze.word_count", {"output_column": "doc_id"}, "doc_id"),
    ("analyze.word_count", {"output_column": "score"}, "score"),  # refused at run time, in a developer's words
])
def test_a_step_that_writes_text_into_the_id_columns_is_refused_naming_its_param(op, params, column):
    with pytest.raises(SpecError, match=f"writes column '{column}', which holds each (row|passage)'s") as err:
        build({"bm25": {"op": "retrieve.bm25"}, "x": {"op": op, "params": params}})
    assert (err.value.step, err.value.field) == ("x", "steps.x.params.output_column")


def test_valid_branches_build_a_reranked_list_fused_with_its_first_stage():
    flow = build({**HYBRID, "final": {"op": "fuse.rrf", "params": {"branches": ["fused", "rr"],
                                                                   "weights": {"fused": 1, "rr": 2}}}})
    assert flow.output == "final" and flow.operators["final"].branch_steps() == ["fused", "rr"]


# -- input columns -----------------------------------------------------------------------------


def test_a_column_no_step_above_brings_is_refused_before_anything_runs(bm25_index):
    spec = FlowSpec.parse({"steps": {**HYBRID, "rr": {"op": "rerank.tfidf", "params": {"text_column": "txt"}}}})
    flow = spec.with_index(bm25_index).build()
    with pytest.raises(SpecError) as err:
        flow.check_columns(["qid", "query"])
    assert err.value.field == "steps.rr.params.text_column"
    # the columns as a plain list, as the web page shows them (it showed Python's ['txt'] and ['docno', 'rank', ...])
    assert err.value.message.startswith("needs input column(s) txt, which no step above it writes") and \
        "[" not in err.value.message, err.value.message
    flow.check_columns(None)  # a flow input that may hold any column could bring it
    flow.check_columns(["qid", "query", "txt"])  # passed through by the retrievers


def test_columns_from_an_unknown_index_a_source_or_a_step_above_are_not_refused(bm25_index, tmp_path):
    wc_on_summary = {"op": "analyze.word_count", "params": {"input_column": "summary"}}
    FlowSpec.parse({"steps": {"bm25": {"op": "retrieve.bm25"}, "wc": wc_on_summary}}).build().check_columns(
        ["qid", "query"])  # index unset: its metadata columns are not known
    with pytest.raises(SpecError, match="summary"):
        FlowSpec.parse({"steps": {"bm25": {"op": "retrieve.bm25"}, "wc": wc_on_summary}}).with_index(
            bm25_index).build().check_columns(["qid", "query"])
    (tmp_path / "d.jsonl").write_text('{"docno": "d1", "summary": "two words"}\n', encoding="utf-8")
    FlowSpec.parse({"steps": {"read": {"op": "sources.jsonl", "params": {"path": str(tmp_path / "d.jsonl")}},
                              "wc": wc_on_summary}}).build().check_columns(None)
    FlowSpec.parse({"steps": {"lang": {"op": "analyze.language"},
                              "wc": {"op": "analyze.word_count", "params": {"input_column": "language"}}}}
                   ).build().check_columns(["qid", "query", "text"])


def test_every_built_in_flow_passes_the_column_check_with_only_queries(bm25_index):
    from flows import store

    for name in store.builtin_names():
        spec = FlowSpec.load(name)
        spec.build().check_columns(None)
        (spec.with_index(bm25_index) if spec.unset_index_steps() else spec).build().check_columns(["qid", "query"])


# -- fan-in into a step that does not fuse -------------------------------------------------------


def test_a_fan_in_of_rankings_into_a_step_that_does_not_fuse_warns_once(caplog):
    steps = {"bm25": {"op": "retrieve.bm25"}, "dense": {"op": "retrieve.dense", "inputs": []},
             "top": {"op": "postprocess.reduce", "params": {"k": 5}, "inputs": ["bm25", "dense"]}}
    with caplog.at_level(logging.WARNING, logger="flows.spec_checks"):
        flow = build(steps, name="fan_in_warning")
        build(steps, name="fan_in_warning")
    assert len(flow.warnings) == 1 and "fuse step" in flow.warnings[0]
    # `tessera flows list` builds every flow: the warning says which one it is about
    assert flow.warnings[0].startswith("flow 'fan_in_warning': step 'top' (postprocess.reduce) reads the union of "
                                       "bm25, dense")
    assert [r.getMessage() for r in caplog.records] == flow.warnings
    assert build({**steps, "top": {"op": "fuse.rrf", "inputs": ["bm25", "dense"]}}).warnings == []


def test_the_union_keeps_a_document_once_per_branch_as_documented():
    """The documented union: a non-fusing fan-in step sees every branch's rows (here two copies of each), so the
    top two of a query are one document twice."""
    words = {"op": "analyze.word_count", "inputs": []}
    flow = build({"a": words, "b": words, "both": {"op": "postprocess.reduce", "params": {"k": 2},
                                                   "inputs": ["a", "b"]}})
    docs = sample_documents(3).append_column("qid", pa.array(["q"] * 3)).append_column("rank", pa.array([1, 2, 3]))
    out = LocalExecutor().run(flow, docs.append_column("query", pa.array(["x"] * 3))).table
    assert out.num_rows == 2 and len(set(out.column("docno").to_pylist())) == 1


# -- step ids ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("step_id, field, words", [
    ("", "steps", "''"), ("my step/x", "steps.my step/x", "'my step/x'"), (1, "steps.1", "a number"),
    (True, "steps", "step id true is YAML's true/false"), (None, "steps", "a step id is empty (null: "),
    ("recherché", "steps.recherché", "('é', U+00E9, is not ASCII)"),
    ("\u0430bc", "steps.\u0430bc", "('\u0430', U+0430, is not ASCII)"),  # a Cyrillic a, which looks like a Latin one
    ("a" * 150, "steps." + "a" * 150, "a step id has at most 100 characters, this one has 150: use 1-100 ASCII"),
])
def test_step_ids_that_are_not_names_are_refused_naming_the_id(step_id, field, words):
    with pytest.raises(SpecError) as err:
        FlowSpec.parse({"steps": {step_id: {"op": "retrieve.bm25"}}})
    assert err.value.field == field and words in err.value.message and "Value error" not in err.value.message


def test_a_bad_step_id_in_a_file_names_its_own_line_not_the_line_of_steps(tmp_path):
    """The error said ``field 'steps': flow.yaml, line 1`` for an id on line 3."""
    path = tmp_path / "flow.yaml"
    path.write_text("name: x\nsteps:\n  recherché: {op: retrieve.bm25}\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        FlowSpec.load(path)
    assert err.value.step == "recherché" and err.value.message.startswith(f"{path}, line 3: step id 'recherché' ")


def test_plain_step_ids_are_accepted():
    assert list(build({"1": {"op": "analyze.word_count"}, "_x.y-z": {"op": "analyze.word_count"}}).order) == [
        "1", "_x.y-z"]


# -- params, YAML booleans, the file in errors --------------------------------------------------------------


def test_params_left_empty_are_no_params(tmp_path):
    (tmp_path / "f.yaml").write_text("steps:\n  bm25:\n    op: retrieve.bm25\n    params:\n", encoding="utf-8")
    assert FlowSpec.load(tmp_path / "f.yaml").steps["bm25"].params == {}


def test_a_yaml_boolean_where_text_is_expected_gets_a_hint(tmp_path):
    path = tmp_path / "norway.yaml"
    path.write_text("steps:\n  lang: {op: analyze.language, params: {languages: [en, no]}}\n", encoding="utf-8")
    with pytest.raises(ParamsError, match=r"quote the value \('no'\)") as err:
        FlowSpec.load(path).build()
    assert err.value.field == "steps.lang.params.languages.1"
    with pytest.raises(SpecError, match="YAML reads unquoted no, yes"):
        FlowSpec.parse({"name": False, "steps": {"a": {"op": "analyze.word_count"}}})


def test_a_validation_error_in_a_file_names_the_file(tmp_path):
    path = tmp_path / "typo.yaml"
    path.write_text("steps:\n  bm25: {op: retrieve.bm25, param: {k: 10}}\n", encoding="utf-8")
    with pytest.raises(SpecError) as err:
        FlowSpec.load(path)
    assert err.value.message.startswith(f"{path}, line 2: unknown field; did you mean 'params'? (fields: batch_size, ")
    assert err.value.field == "steps.bm25.param"


@pytest.mark.parametrize(("step", "field", "hint"), [
    ({"op": "rerank.embedding", "placement": {"deploymnet": "embedder"}}, "steps.rr.placement.deploymnet",
     "unknown field; did you mean 'deployment'? (fields: app, deployment)"),
    ({"op": "rerank.embedding", "placment": {"deployment": "embedder"}}, "steps.rr.placment",
     "unknown field; did you mean 'placement'?"),
])
def test_a_misspelt_spec_field_is_named_with_the_close_names_not_as_the_field_it_leaves_missing(step, field, hint):
    """A misspelt required field is also a missing one: pydantic named ``deployment`` as missing first."""
    with pytest.raises(SpecError) as err:
        FlowSpec.parse({"steps": {"rr": step}})
    assert err.value.field == field and err.value.step == "rr" and err.value.message.startswith(hint)


def test_the_executor_checks_columns_against_its_input_before_the_first_step(bm25_index, monkeypatch):
    """``tessera run`` and ``Flow.run`` refuse the typo before bm25 runs (it ran, then the rerank step failed)."""
    from flows.executors.local import LocalExecutor
    from operators.retrieve.bm25 import BM25Retriever

    def ran(*args, **kwargs):
        raise AssertionError("a step ran before the columns were checked")

    monkeypatch.setattr(BM25Retriever, "transform", ran)
    flow = FlowSpec.parse({"steps": {"bm25": {"op": "retrieve.bm25"},
                                     "rr": {"op": "rerank.tfidf", "params": {"text_column": "txt"}}}}
                          ).with_index(bm25_index).build()
    with pytest.raises(SpecError) as err:
        LocalExecutor().run(flow, ["honey bees"])
    assert err.value.field == "steps.rr.params.text_column"


def test_flow_run_refuses_no_queries_for_a_flow_that_reads_them(bm25_index):
    from flows.api import Flow

    with pytest.raises(SpecError) as err:
        Flow.load({"name": "b", "steps": {"bm25": {"op": "retrieve.bm25"}}}, index=str(bm25_index)).run(None)
    assert err.value.field == "queries" and err.value.step == "bm25"


def test_inputs_written_as_one_name_says_to_write_a_list():
    with pytest.raises(SpecError) as err:
        FlowSpec.parse({"steps": {"bm25": {"op": "retrieve.bm25"}, "top": {"op": "postprocess.reduce",
                                                                         "inputs": "bm25"}}})
    assert err.value.field == "steps.top.inputs" and err.value.step == "top"
    assert err.value.message == "must be a list of step ids (got 'bm25'): write inputs: [bm25]"


def test_a_placed_step_without_its_deployment_stops_the_flow_before_the_steps_in_front_of_it(monkeypatch, tmp_path):
    """The local executor places every step before the first runs: the unreachable deployment of the last step is
    the error, not what the first step does (here, open an index that is not there)."""
    import ray

    from flows.placement import PlacementError

    if ray.is_initialized():  # a Ray test ran in this worker: the step would look for the deployment there
        pytest.skip("this worker is connected to Ray; the test needs a process that is not")
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    spec = FlowSpec.parse({"steps": {
        "bm25": {"op": "retrieve.bm25", "params": {"index": str(tmp_path / "no_index")}},
        "rr": {"op": "rerank.embedding", "placement": {"deployment": "embedder"}}}})
    with pytest.raises(PlacementError, match="'tessera/embedder', but this process is not connected to Ray") as err:
        LocalExecutor().run(spec, "honey bees")
    assert (err.value.step, err.value.op) == ("rr", "rerank.embedding")
    # the command that starts the app, which a user of an installed wheel has too: it said "serve run
    # serve/config.yaml", a file of the repository that is not in his folder
    assert "start the app (tessera serve)" in err.value.message and "serve/config.yaml" not in err.value.message


def test_a_params_error_names_the_operator_by_its_name_where_the_spec_wrote_an_alias():
    """Built, it said operator 'bm25' (as written); the same flow's run-time errors say 'retrieve.bm25'."""
    with pytest.raises(ParamsError) as err:
        build({"b": {"op": "bm25", "params": {"kk": 3}}})
    assert (err.value.op, err.value.field) == ("retrieve.bm25", "steps.b.params.kk")


@pytest.mark.parametrize("k, says", [
    ("abc", "must be a whole number (got 'abc')"), (1.5, "must be a whole number (got 1.5)"),
    (None, "must be a whole number (got null)"), ([3], "must be a whole number (got [3])"),
    (0, "must be greater than 0 (got 0)"),
])
def test_a_params_value_of_the_wrong_kind_is_said_in_a_spec_authors_words_naming_what_was_given(k, says):
    """The Flows tab showed pydantic's "Input should be a valid integer, unable to parse string as an integer" and
    Python's None for YAML's and JSON's null; the field (the step and the param) is kept for the page to name."""
    with pytest.raises(ParamsError) as err:
        build({"b": {"op": "retrieve.bm25", "params": {"k": k}}})
    assert (err.value.step, err.value.field, err.value.message) == ("b", "steps.b.params.k", says)
