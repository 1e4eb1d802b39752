"""An error in a spec file found when the flow is built (an unknown operator or parameter, a missing input, a cycle,
a column no step brings) names the file and the line, as a syntax error does; it named neither, so a flow's author
searched a long spec for the step. A spec given as text is named by nothing, as before."""

from __future__ import annotations

import pytest

from flows.spec import FlowSpec
from operators.errors import ParamsError, SpecError, UnknownOperatorError

FLOW = """name: mine
steps:
  bm25:
    op: retrieve.bm25
    params:
      k: 10
  red:
    op: postprocess.reduce
    params:
      k: 5
"""


def _spec_file(tmp_path, text, name="flow.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_an_unknown_parameter_names_the_file_and_its_line(tmp_path):
    path = _spec_file(tmp_path, FLOW.replace("      k: 5", "      kk: 5"))
    with pytest.raises(ParamsError) as caught:
        FlowSpec.load(str(path)).build()
    err = caught.value
    assert (err.step, err.op, err.field) == ("red", "postprocess.reduce", "steps.red.params.kk")
    assert err.message.startswith(f"{path}, line 10: unknown parameter; did you mean 'k'?"), err.message


def test_an_unknown_operator_names_the_line_also_before_build(tmp_path):
    """``tessera run --index`` looks for the steps that read an index before it builds the flow."""
    path = _spec_file(tmp_path, FLOW.replace("op: postprocess.reduce", "op: postprocess.reduse"))
    spec = FlowSpec.load(str(path))
    for attempt in (spec.build, spec.unset_index_steps, lambda: spec.with_index("x").build()):
        with pytest.raises(UnknownOperatorError) as caught:
            attempt()
        assert caught.value.message.startswith(f"{path}, line 8: unknown operator 'postprocess.reduse'")


def test_a_missing_input_and_a_cycle_name_the_line_of_the_inputs(tmp_path):
    path = _spec_file(tmp_path, FLOW + "    inputs: [bm26]\n")
    with pytest.raises(SpecError) as caught:
        FlowSpec.load(str(path)).build()
    assert caught.value.message.startswith(f"{path}, line 11: input 'bm26' is not a step of this flow")
    path = _spec_file(tmp_path, FLOW.replace("      k: 10\n", "      k: 10\n    inputs: [red]\n"), "cycle.yaml")
    with pytest.raises(SpecError) as caught:
        FlowSpec.load(str(path)).build()
    assert caught.value.message.startswith(f"{path}, line 7: the flow has a cycle")


def test_a_column_no_step_brings_names_the_line_when_the_run_checks_it(tmp_path):
    """The flow input may be any table when the flow is built; the run checks it with the queries' columns."""
    path = _spec_file(tmp_path, "steps:\n  words:\n    op: analyze.word_count\n    params:\n      input_column: txt\n")
    flow = FlowSpec.load(str(path)).build()
    with pytest.raises(SpecError) as caught:
        flow.check_columns(["qid", "query"])
    assert caught.value.message.startswith(f"{path}, line 5: needs input column(s) txt,"), caught.value.message


def test_a_mosaic_request_file_names_the_line_of_its_parameter(tmp_path):
    text = '{"query": "bees",\n "1": {"id": "retrieve.corpus_bm25",\n       "parameters": {"kk": "20"}}}\n'
    path = _spec_file(tmp_path, text, "request.json")
    with pytest.raises(ParamsError) as caught:
        FlowSpec.load(str(path)).build()
    assert caught.value.message.startswith(f"{path}, line 3: unknown parameter")


def test_a_spec_given_as_text_names_no_file():
    with pytest.raises(ParamsError) as caught:
        FlowSpec.load(FLOW.replace("      k: 5", "      kk: 5")).build()
    assert caught.value.message.startswith("unknown parameter")


def test_a_param_set_in_python_is_not_blamed_on_the_file(tmp_path):
    """``Flow.load(path, params={"red.kk": 5})`` / ``tessera run --set``: the file is fine, the setting is not."""
    from flows.param_settings import with_settings

    path = _spec_file(tmp_path, FLOW)
    with pytest.raises(ParamsError) as caught:
        with_settings(FlowSpec.load(str(path)), {"red.kk": 5}).build()
    assert caught.value.message.startswith("unknown parameter"), caught.value.message


def test_a_built_in_flow_by_name_names_no_file():
    """The service runs built-in flows by name: its own files' paths are no client's business."""
    spec = FlowSpec.load("bm25")
    assert spec._origin is None
