"""A step's params set for one run: ``tessera run FLOW --set STEP.PARAM=VALUE`` and ``Flow.load(..., params=)``.

The runs read the sample corpus with BM25 in memory (``retrieve.corpus_bm25``): no index, no model."""

from __future__ import annotations

import datetime
import json

import pytest

from flows.api import Flow
from flows.param_settings import with_settings
from flows.spec import FlowSpec
from operators.errors import SpecError
from tests.text_checks import TRACEBACK

SPEC = {"name": "two", "steps": {"bm25": {"op": "retrieve.corpus_bm25", "params": {"k": 10}},
                                 "bm25.title": {"op": "retrieve.corpus_bm25", "params": {"k": 10}, "inputs": []},
                                 "fused": {"op": "fuse.rrf", "inputs": ["bm25", "bm25.title"]}}}


def test_a_setting_changes_one_param_of_one_step_and_leaves_the_spec_it_came_from_alone():
    spec = FlowSpec.parse(SPEC)
    changed = with_settings(spec, ["bm25.k=3", "fused.weights={bm25: 2, bm25.title: 1}", "bm25.title.k=null"])
    assert changed.steps["bm25"].params == {"k": 3}
    assert changed.steps["bm25.title"].params == {"k": None}  # the longest step id the name begins with
    assert changed.steps["fused"].params == {"weights": {"bm25": 2, "bm25.title": 1}}
    assert spec.steps["bm25"].params == {"k": 10} and spec.steps["fused"].params == {}


def test_a_dotted_path_sets_a_key_inside_a_mapping_param_and_refuses_to_go_through_a_value():
    spec = FlowSpec.parse({"steps": {"a": {"op": "retrieve.corpus_bm25", "params": {"m": {"x": 1}, "s": "text"}}}})
    assert with_settings(spec, {"a.m.y": 2}).steps["a"].params["m"] == {"x": 1, "y": 2}
    assert spec.steps["a"].params["m"] == {"x": 1}
    with pytest.raises(SpecError, match=r"param 's' is 'text', not a mapping"):
        with_settings(spec, {"a.s.y": 2})


@pytest.mark.parametrize("setting, said", [
    ("bm52.k=3", r"flow 'two' has no step 'bm52' \(did you mean 'bm25'\?\); its steps: bm25, bm25.title, fused"),
    ("bm25=3", r"write a setting STEP.PARAM=VALUE"),
    ("bm25.k", r"write a setting STEP.PARAM=VALUE"),
    ("bm25.k= ", r"give a value after '='"),
    ("bm25.k=[1", r"the value is not YAML \(expected ',' or '\]', but got '<stream end>'\)"),
])
def test_a_setting_that_names_no_step_or_has_no_value_is_refused_naming_it(setting, said):
    with pytest.raises(SpecError, match=said) as raised:
        with_settings(FlowSpec.parse(SPEC), [setting], field="set")
    assert raised.value.field == "set"


def test_a_date_that_names_no_day_reaches_the_filter_check_as_text_in_a_setting_and_a_spec_file(tmp_path):
    """YAML reads 2024-02-30 as a date and PyYAML raised a bare ValueError (``tessera run``: an internal error)."""
    spec = {"steps": {"b": {"op": "retrieve.bm25", "params": {"index": str(tmp_path), "filter": {"field": "d",
                                                                                                 "eq": 1}}}}}
    changed = with_settings(FlowSpec.parse(spec), ["b.filter.date_from=2024-02-30", "b.filter.date_to=2024-03-01"])
    assert changed.steps["b"].params["filter"] == {"field": "d", "eq": 1, "date_from": "2024-02-30",
                                                   "date_to": datetime.date(2024, 3, 1)}
    with pytest.raises(SpecError, match=r"must be a valid date.*day value is outside expected range \(got "
                       "'2024-02-30'\\)") as raised:
        Flow.load(spec, params={"b.filter": {"field": "d", "date_from": "2024-02-30"}})
    assert raised.value.field == "steps.b.params.filter.date_from"
    written = tmp_path / "f.yaml"
    written.write_text(f"steps:\n  b:\n    op: retrieve.bm25\n    params: {{index: {tmp_path}, filter: {{field: d, "
                       "date_to: 2021-13-01}}\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"line 4: must be a valid date.*got '2021-13-01'") as raised:
        Flow.load(written)
    assert raised.value.field == "steps.b.params.filter.date_to"


def test_a_setting_is_checked_as_the_step_checks_a_spec_file_param():
    with pytest.raises(SpecError, match=r"unknown parameter; did you mean 'k'\?") as raised:
        Flow.load(SPEC, params={"bm25.kk": 3})
    assert raised.value.step == "bm25" and raised.value.field == "steps.bm25.params.kk"
    with pytest.raises(SpecError, match="params is a dict"):
        Flow.load(SPEC, params=["bm25.k=3"])


def test_run_with_set_returns_what_the_setting_asks_and_explain_keys_that_run(run_cli, tmp_path):
    spec = tmp_path / "two.json"
    spec.write_text(json.dumps(SPEC))
    status, out = run_cli("run", str(spec), "-q", "honey bees", "--json", "--no-cache")
    assert status == 0
    assert len(json.loads(out)["rows"]) > 3  # without the setting: more than 3 rows from each BM25 step
    status, out = run_cli("run", str(spec), "-q", "honey bees", "--json", "--no-cache",
                          "--set", "bm25.k=2", "--set", "bm25.title.k=1")
    assert status == 0
    steps = json.loads(out)["steps"]
    assert steps["bm25"]["rows_out"] == 2 and steps["bm25.title"]["rows_out"] == 1
    _, plain = run_cli("cache", "explain", str(spec), "bm25", "--json")
    _, set_ = run_cli("cache", "explain", str(spec), "bm25", "--json", "--set", "bm25.k=2")
    plain, set_ = json.loads(plain)["steps"][0], json.loads(set_)["steps"][0]
    assert (plain["identity"]["k"], set_["identity"]["k"]) == (10, 2) and plain["step_key"] != set_["step_key"]


def test_run_with_a_set_for_a_step_it_lacks_exits_2_naming_the_option(capsys, monkeypatch, tmp_path):
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
    spec = tmp_path / "two.json"
    spec.write_text(json.dumps(SPEC))
    assert main(["run", str(spec), "-q", "honey bees", "--set", "fusd.k=3"]) == 2
    said = capsys.readouterr().err
    assert "field '--set': 'fusd.k': flow 'two' has no step 'fusd' (did you mean 'fused'?)" in said, said
    assert TRACEBACK not in said
