"""Two steps that write the same per-query metadata key are refused when the flow is built: the later step's value
replaced the earlier's for every query (two ``generate.answer`` steps kept one answer, and ``generate.references``
listed every source twice), and a ``summarize.results`` with ``output_key: usage`` replaced the usage record."""

from __future__ import annotations

import pytest

from flows.spec import FlowSpec
from operators.base import Operator
from operators.errors import ParamsError, SpecError
from operators.registry import create

RETRIEVE = {"b": {"op": "retrieve.bm25", "params": {"index": "/nowhere/idx", "k": 2}},
            "c": {"op": "generate.context", "inputs": ["b"]}}


def build(steps: dict) -> None:
    FlowSpec.model_validate({"name": "two_writers", "steps": {**RETRIEVE, **steps}}).build()


def test_two_answer_steps_are_refused_naming_both_and_the_key():
    with pytest.raises(SpecError) as err:
        build({"a1": {"op": "generate.answer", "inputs": ["c"]},
               "a2": {"op": "generate.answer", "inputs": ["c"], "params": {"temperature": 0.7}},
               "refs": {"op": "generate.references", "inputs": ["a1", "a2"]}})
    assert (err.value.step, err.value.field) == ("a2", "steps.a2.op")
    said = str(err.value)
    assert "steps 'a1' (generate.answer) and 'a2' (generate.answer) both write the query metadata 'abstained', " in said
    assert "'answer', 'answer_cut', " in said and said.count("'answer'") == 1


def test_a_summary_under_the_answers_key_is_refused_naming_output_key_and_another_key_is_not():
    with pytest.raises(SpecError) as err:
        build({"a": {"op": "generate.answer", "inputs": ["c"]},
               "s": {"op": "summarize.results", "inputs": ["a"], "params": {"output_key": "answer"}}})
    assert err.value.field == "steps.s.params.output_key" and "another output_key" in str(err.value)
    build({"a": {"op": "generate.answer", "inputs": ["c"]},
           "s": {"op": "summarize.results", "inputs": ["a"], "params": {"output_key": "gist"}}})
    with pytest.raises(SpecError, match="'summary_finish_reason'"):  # the keys a summary writes beside it
        build({"s1": {"op": "summarize.results", "inputs": ["c"]},
               "s2": {"op": "summarize.results", "inputs": ["s1"], "params": {"output_key": "summary_finish_reason"}}})


@pytest.mark.parametrize("key", ["usage", "degraded"])
def test_a_summary_cannot_take_the_keys_every_step_adds_to(key):
    with pytest.raises(ParamsError) as err:
        create("summarize.results", {"output_key": key}, step_id="s")
    assert err.value.field == "params.output_key" and "every step adds to" in str(err.value)


def test_an_operator_that_writes_a_key_it_does_not_declare_fails_at_once():
    class Declares(Operator):
        name = "mylab.declares"
        scope = "query"

        def metadata_keys(self):
            return frozenset({"verdict"})

    op = Declares({}, step_id="d")
    op.emit_metadata("q1", "verdict", "yes")
    op.mark_degraded("q1", "the shared keys are everyone's")
    with pytest.raises(RuntimeError, match="'verdict2', which its metadata_keys"):
        op.emit_metadata("q1", "verdict2", "no")
    assert set(op.drain_metadata()["q1"]) == {"verdict", "degraded"}
