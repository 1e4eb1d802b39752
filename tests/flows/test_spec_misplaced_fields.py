"""A spec whose field sits a level off, as YAML's indentation puts it: a param beside ``params`` (at the step's level),
a step's field inside ``params``, a step id that is a number in ``inputs``. Each error says where the field goes."""

from __future__ import annotations

import pytest

from flows.spec import FlowSpec
from operators.errors import ParamsError, SpecError


def test_a_param_written_beside_params_is_told_to_go_under_it(tmp_path):
    """``params:`` left empty and ``k: 5`` indented as its sibling: pydantic sees a step field 'k'."""
    path = tmp_path / "flow.yaml"
    path.write_text("steps:\n  bm25:\n    op: retrieve.bm25\n    params: {k: 10}\n"
                    "  red:\n    op: postprocess.reduce\n    params:\n    k: 5\n")
    with pytest.raises(SpecError) as caught:
        FlowSpec.load(str(path))
    err = caught.value
    assert (err.step, err.field) == ("red", "steps.red.k")
    assert "'k' is a parameter of postprocess.reduce: put it under the step's params" in err.message
    assert str(path) in err.message


def test_an_unknown_step_field_that_is_no_param_gets_no_params_hint():
    with pytest.raises(SpecError) as caught:
        FlowSpec.parse({"steps": {"bm25": {"op": "retrieve.bm25", "kache": False}}})
    assert "did you mean 'cache'?" in caught.value.message
    assert "parameter" not in caught.value.message


def test_a_step_field_written_inside_params_is_told_to_go_beside_them():
    spec = FlowSpec.parse({"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 10}},
                                     "red": {"op": "postprocess.reduce", "params": {"k": 5, "inputs": ["bm25"]}}}})
    with pytest.raises(ParamsError) as caught:
        spec.build()
    err = caught.value
    assert (err.step, err.field) == ("red", "steps.red.params.inputs")
    assert "'inputs' is a field of the step, not a parameter of postprocess.reduce: write it beside params" \
        in err.message


def test_a_number_in_inputs_is_told_to_be_quoted():
    """Step ids '1', '2' quoted as keys (as the docs say), but ``inputs: [1]`` left a YAML number."""
    text = "steps:\n  '1': {op: retrieve.bm25}\n  '2': {op: postprocess.reduce, params: {k: 5}, inputs: [1]}\n"
    with pytest.raises(SpecError) as caught:
        FlowSpec.load(text)
    err = caught.value
    assert (err.step, err.field) == ("2", "steps.2.inputs.0")
    assert "quote a step id that is a number (inputs: ['1'])" in err.message


@pytest.mark.parametrize("step, says", [
    ("retrieve.bm25", "got a string 'retrieve.bm25': write {op: retrieve.bm25}"),
    (None, "got nothing (null)"),
    (["retrieve.bm25"], "got a list ['retrieve.bm25']"),
])
def test_a_step_that_is_not_a_mapping_is_said_in_the_specs_words(step, says):
    """Pydantic said "a valid dictionary or instance of StepSpec": a Python class the spec's author never wrote."""
    with pytest.raises(SpecError) as caught:
        FlowSpec.parse({"steps": {"bm25": step}})
    assert (caught.value.step, caught.value.field) == ("bm25", "steps.bm25")
    assert caught.value.message == f"a step is a mapping with its op (and params, inputs, ...), {says}"


def test_a_placement_that_is_not_a_mapping_says_what_one_holds():
    with pytest.raises(SpecError) as caught:
        FlowSpec.parse({"steps": {"ce": {"op": "rerank.embedding", "placement": "tessera-cross-encoder"}}})
    assert caught.value.field == "steps.ce.placement"
    assert "a placement is a mapping ({deployment: NAME, app: tessera})" in caught.value.message
    assert "StepSpec" not in caught.value.message and "Placement" not in caught.value.message


@pytest.mark.parametrize("spec, field, says", [
    ({"steps": None}, "steps", "the steps are a mapping of step ids to steps (bm25: {op: retrieve.bm25}), got "
     "nothing (null)"),
    ({"steps": [{"op": "retrieve.bm25"}]}, "steps", "the steps are a mapping of step ids to steps (bm25: {op: "
     "retrieve.bm25}), got a list [{'op': 'retrieve.bm25'}]"),
    ({"steps": {"bm25": {"op": "retrieve.bm25", "params": ["k", 10]}}}, "steps.bm25.params",
     "params are a mapping of parameter names to values (params: {k: 10}), got a list ['k', 10]"),
])
def test_steps_or_params_written_as_a_list_say_what_a_mapping_holds(spec, field, says):
    """``steps: [- {op: ...}]`` (a list, as other pipeline tools write it) said only "Input should be a valid
    dictionary"."""
    with pytest.raises(SpecError) as caught:
        FlowSpec.parse(spec)
    assert (caught.value.field, caught.value.message) == (field, says)


BM25 = {"op": "retrieve.bm25"}


@pytest.mark.parametrize("spec, field, says", [
    ({"steps": {"b": {"op": 5}}}, "steps.b.op", "must be an operator's name (tessera ops lists them) (got 5)"),
    ({"steps": {"b": BM25, "r": {"op": "postprocess.reduce", "inputs": [None]}}}, "steps.r.inputs.0",
     "must be a step id (got null)"),
    ({"steps": {"b": BM25}, "output": 3}, "output",
     "must be a step id (got 3): quote a step id that is a number (output: '3')"),
    ({"steps": {"b": {**BM25, "cache": "maybe"}}}, "steps.b.cache", "must be true or false (got 'maybe')"),
    ({"steps": {"b": {**BM25, "batch_size": 1.5}}}, "steps.b.batch_size", "must be a whole number (got 1.5)"),
    # pydantic read true as 1 (batch_size: yes ran with batches of one row) and took an infinite num_cpus
    ({"steps": {"b": {**BM25, "batch_size": True}}}, "steps.b.batch_size", "must be a number, not true"),
    # pydantic's "Field required" alone: which field, and what it holds
    ({"name": "x"}, "steps", "Field required: a flow's steps, by id (steps: {bm25: {op: retrieve.bm25}})"),
    ({"steps": {"b": {"params": {"k": 3}}}}, "steps.b.op",
     "Field required: the operator the step runs (op: retrieve.bm25; tessera ops lists them)"),
    ({"steps": {"b": {**BM25, "num_gpus": False}}}, "steps.b.num_gpus", "must be a number, not false"),
    ({"steps": {"b": {**BM25, "num_cpus": float("inf")}}}, "steps.b.num_cpus", "must be a finite number (got inf)"),
    ({"steps": {"b": BM25}, "name": ["x"]}, "name", "must be a string (got ['x'])"),
    ({"steps": {"b": BM25}, "index_settings": {"dim": "abc"}}, "index_settings.dim",
     "must be a whole number (got 'abc')"),
    ({"steps": {"b": BM25}, "index_settings": {"stopwords": 5}}, "index_settings.stopwords",
     "must be a string or a list of strings (got 5)"),
    ({"steps": {"b": BM25}, "index_settings": [1]}, "index_settings", "index_settings are a mapping of setting "
     "names to values (index_settings: {encoder: NAME}), got a list [1]"),
])
def test_a_field_of_the_spec_of_the_wrong_kind_says_what_it_must_be_and_the_value_given(spec, field, says):
    """A step's ``op: 5`` said pydantic's "Input should be a valid string", an index setting's field was
    ``index_settings`` with "dim: Input should be a valid integer, unable to parse string as an integer" (a
    stopwords of the wrong kind ``stopwords.str``): now each is said as a param's error is (``steps.b.params.k``:
    "must be a whole number (got 'abc')")."""
    with pytest.raises(SpecError) as caught:
        FlowSpec.parse(spec)
    assert (caught.value.field, caught.value.message) == (field, says)


def test_an_index_setting_in_a_file_names_its_line(tmp_path):
    path = tmp_path / "flow.yaml"
    path.write_text("index_settings:\n  encoder: all-MiniLM-L6-v2\n  dim: abc\nsteps:\n  b: {op: retrieve.bm25}\n")
    with pytest.raises(SpecError) as caught:
        FlowSpec.load(str(path))
    assert str(caught.value) == f"field 'index_settings.dim': {path}, line 3: must be a whole number (got 'abc')"


@pytest.mark.parametrize("text, field", [
    ("index_settings: {stopwords: 5}\nsteps:\n  b: {op: retrieve.bm25, inputs: 5}\n", "index_settings.stopwords"),
    ("steps:\n  b: {op: retrieve.bm25, inputs: 5}\nindex_settings: {stopwords: 5}\n", "steps.b.inputs"),
    ("output: 5\nsteps:\n  b: {op: retrieve.bm25, inputs: 5}\n", "output"),
    ("steps:\n  a: {op: retrieve.bm25, inputs: 5}\n  b: {opp: retrieve.bm25}\n", "steps.a.inputs"),
    ("steps:\n  b: {opp: retrieve.bm25}\n", "steps.b.opp"),  # the key misspelt, not the `op` it leaves out
])
def test_of_several_errors_in_a_spec_the_first_in_the_file_is_said(tmp_path, text, field):
    """``index_settings`` above a bad step was said after it (the order of the spec's model), and an unknown key of
    a later step before the error of an earlier one."""
    path = tmp_path / "flow.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        FlowSpec.load(str(path))
    assert caught.value.field == field, caught.value


@pytest.mark.parametrize("step, field, said", [
    ({"operator": "retrieve.bm25"}, "operator", "; a step's operator is op: {op: retrieve.bm25}"),
    ({"type": "retrieve.bm25"}, "type", "; a step's operator is op: {op: retrieve.bm25}"),  # Haystack's
    ({"op": "retrieve.bm25", "parameters": {"k": 3}}, "parameters", "; a step's params are params: {params: {k: 10}}"),
    ({"op": "fuse.rrf", "depends_on": ["a"]}, "depends_on",
     "; a step's inputs are inputs, a list of step ids: {inputs: [bm25, dense]}"),
])
def test_another_frameworks_word_for_a_step_field_names_tesseras(step, field, said):
    """``{operator: retrieve.bm25}`` listed the step's fields alone: ``operator`` is too far from ``op`` for a
    close-name hint."""
    with pytest.raises(SpecError) as caught:
        FlowSpec.parse({"name": "x", "steps": {"s": step}})
    assert caught.value.field == f"steps.s.{field}" and caught.value.message.endswith(said)
