"""Flow specs: validation before anything runs, errors that name step and field, the mosaicRAG dialect."""

from __future__ import annotations

import json

import pytest

from flows.spec import FlowSpec, from_mosaic
from flows.store import RECIPES_DIR, builtin_names
from flows.train.recipe import load_recipe, recipe_names
from operators.errors import ParamsError, SpecError, UnknownOperatorError


def build(steps, **extra):
    return FlowSpec.parse({"name": "t", "steps": steps, **extra}).build()


def test_previous_step_is_the_default_input_and_empty_inputs_mean_flow_input():
    flow = build({
        "a": {"op": "analyze.word_count"},
        "b": {"op": "analyze.word_count", "params": {"output_column": "n"}},
        "c": {"op": "analyze.word_count", "inputs": []},
        "d": {"op": "postprocess.reduce", "inputs": ["b", "c"]},
    })
    assert flow.inputs == {"a": (), "b": ("a",), "c": (), "d": ("b", "c")}
    assert flow.order == ["a", "b", "c", "d"]
    assert flow.consumers["a"] == ["b"]
    assert flow.operators["b"].input_steps == ("a",)


def test_inputs_may_point_forward_and_order_is_topological():
    flow = build({
        "late": {"op": "postprocess.reduce", "inputs": ["early"]},
        "early": {"op": "analyze.word_count", "inputs": []},
    })
    assert flow.order == ["early", "late"] and flow.output == "late"


def test_unknown_operator_names_the_step_and_suggests():
    with pytest.raises(UnknownOperatorError) as err:
        build({"count": {"op": "analyze.word_cout"}})
    assert err.value.step == "count" and err.value.field == "steps.count.op"
    assert "analyze.word_count" in str(err.value)


def test_unknown_parameter_names_step_and_field():
    with pytest.raises(ParamsError) as err:
        build({"top": {"op": "postprocess.reduce", "params": {"kk": 3}}})
    assert err.value.step == "top"
    assert err.value.field == "steps.top.params.kk"
    assert "unknown parameter" in str(err.value)


def test_mistyped_parameter_names_the_field_and_value():
    with pytest.raises(ParamsError) as err:
        build({"top": {"op": "postprocess.reduce", "params": {"k": "many"}}})
    assert err.value.field == "steps.top.params.k"
    assert "'many'" in str(err.value)
    with pytest.raises(ParamsError, match="greater than 0"):
        build({"top": {"op": "postprocess.reduce", "params": {"k": 0}}})


def test_cycle_is_rejected_naming_its_steps():
    with pytest.raises(SpecError, match="cycle") as err:
        build({
            "a": {"op": "analyze.word_count", "inputs": ["c"]},
            "b": {"op": "analyze.word_count", "inputs": ["a"]},
            "c": {"op": "analyze.word_count", "inputs": ["b"]},
        })
    assert err.value.field == "inputs"
    named = str(err.value).split(": ", 1)[1].replace(" -> ", " ").replace("the flow has a cycle", "")
    assert {"a", "b", "c"} <= set(named.split())


def test_missing_input_and_self_input_are_rejected():
    with pytest.raises(SpecError, match="'nope' is not a step") as err:
        build({"a": {"op": "analyze.word_count", "inputs": ["nope"]}})
    assert err.value.step == "a" and err.value.field == "inputs"
    with pytest.raises(SpecError, match="its own output"):
        build({"a": {"op": "analyze.word_count", "inputs": ["a"]}})


def test_a_misspelt_input_or_output_is_offered_the_close_step_ids():
    """``inputs: [bm26]`` listed the steps, and ``output: rerankk`` said only that it is not a step, where a misspelt
    operator or param is offered the close names."""
    steps = {"bm25": {"op": "analyze.word_count"}, "rerank": {"op": "postprocess.reduce", "inputs": ["bm26"]}}
    with pytest.raises(SpecError) as err:
        build(steps)
    assert err.value.message == ("input 'bm26' is not a step of this flow; did you mean 'bm25'? (steps: bm25, "
                                 "rerank)")
    steps["rerank"]["inputs"] = ["bm25"]
    with pytest.raises(SpecError) as err:
        build(steps, output="rerankk")
    assert err.value.field == "output"
    assert err.value.message == ("output 'rerankk' is not a step of this flow; did you mean 'rerank'? (steps: bm25, "
                                 "rerank)")


def test_an_input_listed_twice_is_named():
    """``inputs: [bm25, bm25]`` said "the same input is listed twice", naming no input."""
    with pytest.raises(SpecError) as err:
        build({"bm25": {"op": "analyze.word_count"}, "dense": {"op": "analyze.word_count", "inputs": []},
               "fused": {"op": "postprocess.reduce", "inputs": ["dense", "bm25", "bm25"]}})
    assert err.value.message == "the input 'bm25' is listed twice"
    assert err.value.step == "fused" and err.value.field == "inputs"


def test_bad_step_fields_and_empty_flows_are_rejected():
    with pytest.raises(SpecError) as err:
        FlowSpec.parse({"steps": {"a": {"op": "analyze.word_count", "parms": {}}}})
    assert err.value.step == "a" and err.value.field == "steps.a.parms"
    with pytest.raises(SpecError, match="at least one step"):
        FlowSpec.parse({"steps": {}})
    with pytest.raises(SpecError) as err:
        FlowSpec.parse({"steps": {"a": {"op": "analyze.word_count", "batch_size": 0}}})
    assert err.value.field == "steps.a.batch_size"
    with pytest.raises(SpecError, match="output"):
        build({"a": {"op": "analyze.word_count"}}, output="zzz")


def test_the_output_is_the_one_step_nobody_reads_wherever_it_is_listed():
    words, fuse = {"op": "analyze.word_count", "inputs": []}, {"op": "postprocess.reduce", "inputs": ["a", "b"]}
    listed_last = build({"a": words, "b": words, "both": fuse})
    listed_first = build({"both": fuse, "a": words, "b": words})
    assert listed_last.output == listed_first.output == "both"
    assert listed_first.needed_steps() == ["a", "b", "both"]
    with pytest.raises(SpecError, match="'a', 'b' are each read by no other step") as err:
        build({"a": words, "b": words})
    assert (err.value.step, err.value.field) == ("a", "output")
    assert build({"a": words, "b": words}, output="b").needed_steps() == ["b"]

    import yaml  # a built-in flow written back with sorted keys ("final" is no longer listed last) is the same flow

    from flows.specfile import resolve_spec_path
    text = resolve_spec_path("hybrid_ce_long").read_text(encoding="utf-8")
    shuffled = yaml.safe_load(yaml.safe_dump(yaml.safe_load(text)))
    assert list(shuffled["steps"])[-1] == "rerank"
    assert FlowSpec.parse(shuffled).build().output == FlowSpec.load(text).build().output == "final"


def test_yaml_and_json_round_trip(tmp_path):
    spec = FlowSpec.parse({"name": "rt", "steps": {
        "a": {"op": "analyze.word_count", "params": {"output_column": "n"}},
        "b": {"op": "postprocess.reduce", "params": {"k": 3}, "inputs": ["a"], "cache": False},
    }})
    for name in ("rt.yaml", "rt.json"):
        path = spec.save(tmp_path / name)
        again = FlowSpec.load(path)
        assert again == spec
    assert FlowSpec.load(spec.to_yaml()) == spec
    assert json.loads(spec.to_json())["steps"]["b"]["cache"] is False


def test_bad_yaml_and_unknown_names_are_spec_errors():
    with pytest.raises(SpecError, match="YAML"):
        FlowSpec.load("steps: {a: [unclosed\n")
    with pytest.raises(SpecError, match="no flow spec file or built-in flow"):
        FlowSpec.load("no-such-flow")


def test_mosaic_request_is_a_linear_flow_with_step_numbers_as_ids():
    body = {
        "query": "honey bees",
        "parameters": {"k": 4},
        "1": {"id": "reduction", "parameters": {"rank_column": "rank"}},
        "2": {"id": "analyze.word_count", "parameters": {"output_column": "words"}},
    }
    spec, query = from_mosaic(body)
    assert query == "honey bees"
    flow = spec.build()
    assert flow.order == ["1", "2"] and flow.inputs == {"1": (), "2": ("1",)}
    assert flow.operators["1"].name == "postprocess.reduce"
    assert flow.operators["1"].params.k == 4  # top-level parameters go to the first step
    assert flow.operators["2"].params.output_column == "words"
    assert FlowSpec.parse(body) == spec


def test_mosaic_errors_name_the_step():
    with pytest.raises(SpecError) as err:
        from_mosaic({"query": "q", "1": {"parameters": {}}})
    assert err.value.field == "1.id"
    with pytest.raises(UnknownOperatorError) as err:
        from_mosaic({"query": "q", "1": {"id": "no_such_step"}})
    assert err.value.step == "1"
    with pytest.raises(SpecError, match="numbered 1..n"):
        from_mosaic({"query": "q", "1": {"id": "reduction"}, "3": {"id": "reduction"}})
    with pytest.raises(ParamsError) as err:
        from_mosaic({"query": "q", "1": {"id": "reduction", "parameters": {"k": "x"}}})[0].build()
    assert err.value.step == "1" and err.value.field == "steps.1.params.k"
    for query, kind in ((["a", "b"], "an array"), ({"text": "a"}, "an object"), (True, "true/false")):
        with pytest.raises(SpecError, match=f"must be the query text, got {kind}$") as err:  # JSON's words, not
            from_mosaic({"query": query, "1": {"id": "reduction"}})  # Python's (got list, got dict)
        assert err.value.field == "query"
    assert from_mosaic({"query": 7, "1": {"id": "reduction"}})[1] == "7"
    for body, kind in (([1], "an array"), ("1", "a string"), (None, "null")):  # no object: body.get's error before
        with pytest.raises(SpecError, match=f"a mosaicRAG request is a JSON object of numbered steps, got {kind}") \
                as err:
            from_mosaic(body)
        assert err.value.field == "body"
    for key in ("¹", "٣", "9" * 5000):  # digits to str.isdigit, not to int(): unknown fields, never a crash
        with pytest.raises(SpecError) as err:
            from_mosaic({"query": "q", "1": {"id": "reduction"}, key: {"id": "reduction"}})
        assert err.value.field == key


def test_a_mosaic_query_of_nan_or_an_infinity_and_a_step_id_that_is_no_name_are_refused_naming_the_field():
    """Python's JSON reads ``NaN`` and ``Infinity``, so ``"query": NaN`` ran a task searching for "nan" (a native
    body's ``query`` refuses any number); ``"id": null`` was looked up as the operator 'None', in Python's word."""
    for query in (float("nan"), float("inf"), float("-inf")):
        with pytest.raises(SpecError, match="must be the query text, got .*, a number JSON does not carry") as err:
            from_mosaic({"query": query, "1": {"id": "reduction"}})
        assert err.value.field == "query"
    assert from_mosaic({"query": 1.5, "1": {"id": "reduction"}})[1] == "1.5"  # a finite number is still its text
    for step_id, kind in ((None, "null"), (5, "a number"), (["bm25"], "an array")):
        with pytest.raises(SpecError) as err:
            from_mosaic({"query": "q", "1": {"id": step_id}})
        assert not isinstance(err.value, UnknownOperatorError) and err.value.field == "1.id", err.value
        assert f"must be an operator's name or alias (GET /pipeline/info lists them), got {kind}" in str(err.value)


def test_mosaic_yes_no_strings_become_booleans():
    spec, _ = from_mosaic({"query": "q", "1": {"id": "reduction", "parameters": {"k": 2}}})
    assert spec.steps["1"].params == {"k": 2}
    from flows.mosaic_request import _mosaic_values

    assert _mosaic_values({"process_query": "Yes", "x": "No", "y": "maybe"}) == {
        "process_query": True, "x": False, "y": "maybe"}


@pytest.mark.parametrize("name", builtin_names())
def test_every_builtin_spec_builds(name):
    """A typo in a shipped spec (an unknown op or param, a dangling input) fails here, not in a user's run."""
    flow_spec = FlowSpec.load(name)
    flow = flow_spec.build()
    assert flow.order and flow.output in flow_spec.steps


@pytest.mark.parametrize("name", recipe_names())
def test_every_builtin_recipe_builds_and_is_not_a_flow(name):
    """Recipes live apart from flows: a recipe's mining flow builds, and its name is not a flow's."""
    flow_spec, training = load_recipe(name)
    assert training.split == "train"
    assert flow_spec.build().order
    assert name not in builtin_names()
    with pytest.raises(SpecError, match=f"'{name}' is a training recipe, not a flow to run: train with it by "
                       f"tessera train --spec {name}"):  # not "no flow ... named", of a name `flows list` lists
        FlowSpec.load(name)



def test_a_recipe_file_given_as_a_flow_names_the_file_to_train_with():
    """``tessera run flows/train/recipes/train.yaml`` ended ``train with it by tessera train --spec (python -m
    flows.train)``: an option without its value, read as the command to type."""
    recipe = RECIPES_DIR / "train.yaml"
    with pytest.raises(SpecError) as err:
        FlowSpec.load(str(recipe))
    assert err.value.message.startswith(f"{recipe}, line ")  # the file that RECIPE_FILE stands for
    assert err.value.message.endswith("a training recipe, not a flow to run: train with it by tessera train --spec "
                                      "RECIPE_FILE (or python -m flows.train --spec RECIPE_FILE)")

def test_true_is_not_a_number_and_errors_do_not_echo_huge_values():
    with pytest.raises(ParamsError, match="must be a number, not true") as err:
        FlowSpec.parse({"steps": {"top": {"op": "postprocess.reduce", "params": {"k": True}}}}).build()
    assert err.value.field == "steps.top.params.k"
    huge = [[list(range(1000))] * 1000] * 1000  # shared lists: a billion values if printed in full
    with pytest.raises(ParamsError) as err:
        FlowSpec.parse({"steps": {"top": {"op": "postprocess.reduce", "params": {"k": huge}}}}).build()
    assert len(str(err.value)) < 300 and "(got [[[0, 1, 2" in str(err.value)


@pytest.mark.parametrize("filter_, field", [
    ({"field": "published", "year": True}, "filter.year"),  # filtered on year 1 before, finding nothing
    ({"any": [{"field": "year", "lt": 1990}, {"field": "published", "month": True}]}, "filter.any.1.month"),
])
def test_true_is_not_a_number_inside_a_param_either(filter_, field):
    """A number inside a param's own model (a filter's year) read ``true`` as 1 too; a boolean where the
    filter compares values (``eq: true`` on a column of booleans) is a value, and stays one."""
    with pytest.raises(ParamsError, match="must be a number, not true") as err:
        FlowSpec.parse({"steps": {"keep": {"op": "postprocess.filter", "params": {"filter": filter_}}}}).build()
    assert err.value.field == f"steps.keep.params.{field}"
    steps = {"bm25": {"op": "retrieve.bm25", "params": {"index": "x"}},
             "dense": {"op": "retrieve.bm25", "params": {"index": "x"}, "inputs": []},
             "fused": {"op": "fuse.rrf", "params": {"weights": {"bm25": True}}, "inputs": ["bm25", "dense"]}}
    with pytest.raises(ParamsError, match="must be a number, not true") as err:  # a weight of 1.0 before
        FlowSpec.parse({"steps": steps}).build()
    assert err.value.field == "steps.fused.params.weights.bm25"
    assert FlowSpec.parse({"steps": {"keep": {"op": "postprocess.filter",
                                              "params": {"filter": {"field": "open", "eq": True}}}}}).build()


@pytest.mark.parametrize("params, field, said", [
    ({"weights": {"bm25": float("nan"), "dense": 1.0}}, "weights.bm25", "nan"),  # ranked bm25's documents last
    ({"k": float("inf")}, "k", "inf"),  # every score 0: an arbitrary order
    ({"weights": {"bm25": "NaN"}}, "weights.bm25", "nan"),  # text that pydantic reads as a float
])
def test_nan_and_infinity_are_not_params(params, field, said):
    """YAML's .nan and .inf (and Python's JSON's NaN) parse as floats that pydantic takes: refused, naming the field."""
    steps = {"bm25": {"op": "retrieve.bm25", "params": {"index": "x"}},
             "dense": {"op": "retrieve.bm25", "params": {"index": "x"}, "inputs": []},
             "fused": {"op": "fuse.rrf", "params": params, "inputs": ["bm25", "dense"]}}
    with pytest.raises(ParamsError, match=f"must be a finite number, not {said}") as err:
        FlowSpec.parse({"steps": steps}).build()
    assert err.value.field == f"steps.fused.params.{field}"
    assert FlowSpec.parse({"steps": {"top": {"op": "postprocess.reduce", "params": {"k": 3}}}}).build()


def test_with_index_takes_a_path_a_name_or_an_index_opened_in_python(tmp_path):
    from flows.api import Index as OpenedIndex
    from operators.store import Index, IndexSettings

    store_index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    for given in (str(store_index.path), store_index.path, store_index, OpenedIndex(store_index)):
        spec = FlowSpec.load("hybrid").with_index(given)
        assert {spec.steps[s].params["index"] for s in ("bm25", "dense")} == {str(store_index.path)}, given
    assert FlowSpec.load("bm25").with_index("sample").steps["bm25"].params["index"] == "sample"


def test_parse_takes_a_steps_index_as_a_path_or_an_index_opened_in_python(tmp_path):
    """``FlowSpec.parse`` (public, docs/python.md) held a ``pathlib.Path`` as it was, refused at build ("must be a
    string (got PosixPath(...))"), while ``Flow.load`` of the same dict took it; it is the path's text, and the dict
    given is left as it was."""
    from flows.api import Index as OpenedIndex
    from operators.store import Index, IndexSettings

    store_index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    for given in (store_index.path, store_index, OpenedIndex(store_index)):
        data = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"index": given, "k": 3}}}}
        spec = FlowSpec.parse(data)
        assert spec.steps["bm25"].params == {"index": str(store_index.path), "k": 3}, given
        assert data["steps"]["bm25"]["params"]["index"] is given
        assert spec.build().operators["bm25"].params.index == str(store_index.path)
        assert FlowSpec.parse(json.loads(spec.to_json())) == spec


def test_a_flow_says_whether_its_output_ranks_and_what_a_runner_must_fill_in():
    from flows.store import builtin_path

    def built(name: str):
        return FlowSpec.load(builtin_path(name)).build()

    assert built("hybrid").ranks() and built("rag").ranks() and not built("answer_only").ranks()
    assert built("hybrid").unset_params() == [] and built("rag").unset_params() == []
    [unset] = built("rag_gold").unset_params()  # its dataset: tessera bench sets it to the benchmark's
    assert (unset.step, unset.field) == ("gold", "steps.gold.params.dataset") and "tessera bench" in unset.message
    spec = FlowSpec.load(builtin_path("rag_gold"))
    filled = spec.model_copy(update={"steps": {**spec.steps, "gold": spec.steps["gold"].model_copy(
        update={"params": {"dataset": "/some/beir/folder"}})}})
    assert filled.build().unset_params() == []
    missing = filled.build().missing_files()  # a folder that is not there: its corpus and its qrels, each by field
    assert [(m.step, m.field) for m in missing] == [("gold", "steps.gold.params.dataset"),
                                                    ("gold", "steps.gold.params.split")]
    assert "/some/beir/folder/corpus.jsonl not found" in missing[0].message


def test_a_flow_names_the_files_its_needed_steps_read_that_are_not_there(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    spec = FlowSpec.model_validate({"name": "files", "output": "first", "steps": {
        "first": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(corpus)}},
        "unused": {"op": "retrieve.corpus_bm25", "params": {"corpus": str(tmp_path / "other.jsonl")}, "inputs": []}}})
    [missing] = spec.build().missing_files()  # the step the output does not need is not asked
    assert (missing.step, missing.field) == ("first", "steps.first.params.corpus")
    assert f"corpus file not found: {corpus}" in missing.message
    corpus.write_text('{"_id": "d1", "text": "honey"}\n')
    assert spec.build().missing_files() == []


@pytest.mark.parametrize("op, param", [("summarize.documents", "output_column"), ("analyze.word_count", "input_column"),
                                       ("generate.context", "text_column")])
def test_an_empty_column_name_is_refused_naming_the_param(op, param):
    """output_column: "" wrote columns '', '_finish_reason' and '_cut'."""
    with pytest.raises(ParamsError) as err:
        FlowSpec.parse({"steps": {"s": {"op": op, "params": {param: "  "}}}}).build()
    assert err.value.field == f"steps.s.params.{param}" and "a column's name, not empty" in str(err.value)
