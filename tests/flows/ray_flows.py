"""The flows and the comparison the Ray executor's tests share (test_ray_executor.py, test_ray_executor_runs.py): flows
over the bundled sample, ``flow_by_hand`` for operators the registry does not know, and ``assert_same``, which holds a
Ray run to the local executor's. Not a test module (pytest collects none of it); the test modules have pytest
rewrite its asserts."""

from __future__ import annotations

from typing import Any

from flows.spec import Flow, FlowSpec, StepSpec
from operators.base import Operator
from operators.testing import sample_results


def flow_by_hand(name: str, steps: list[tuple[str, Operator, list[str] | None]], **overrides: dict[str, Any]) -> Flow:
    """A flow over operators the registry does not know; steps are given in run order."""
    spec = FlowSpec(name=name, steps={
        sid: StepSpec(op=op.name, params=op.params.model_dump(), inputs=inputs, **overrides.get(sid, {}))
        for sid, op, inputs in steps
    })
    ids = [sid for sid, _, _ in steps]
    inputs = {sid: tuple(ins) if ins is not None else ((ids[i - 1],) if i else ())
              for i, (sid, _, ins) in enumerate(steps)}
    operators = {sid: type(op)(op.params, step_id=sid, input_steps=inputs[sid]) for sid, op, _ in steps}
    return Flow(spec=spec, order=ids, inputs=inputs, operators=operators, output=ids[-1])


def _records(result) -> dict[str, tuple]:
    return {s: (r.op, r.rows_in, r.rows_out, r.units, r.hits, r.cached) for s, r in result.steps.items()}


def assert_same(local, ray_result, *, history: bool = True) -> None:
    assert ray_result.order == local.order
    assert ray_result.table.schema == local.table.schema
    assert ray_result.table.equals(local.table)
    assert _records(ray_result) == _records(local)
    assert ray_result.metadata == local.metadata
    assert ray_result.executor == "ray"
    assert set(ray_result.timings.summary()) >= {k for k in local.timings.summary() if k.startswith("step:")}
    if history:
        assert list(ray_result.history) == list(local.history)
        for step, table in local.history.items():
            assert ray_result.history[step].equals(table), step


# -- flows over the bundled sample ------------------------------------------------------

RESULTS = sample_results(3, 8)

LINEAR = {"name": "linear", "steps": {
    "words": {"op": "analyze.word_count", "batch_size": 5},
    "top": {"op": "postprocess.reduce", "params": {"k": 5}, "batch_size": 8},
    "top3": {"op": "postprocess.reduce", "params": {"k": 3, "rank_column": "rank"}},
}}

BRANCHES = {"name": "branches", "steps": {
    "words": {"op": "analyze.word_count"},
    "titles": {"op": "analyze.word_count", "params": {"input_column": "title", "output_column": "n_title"},
               "inputs": ["words"]},
    "top": {"op": "postprocess.reduce", "params": {"k": 2}, "inputs": ["words"]},
    "joined": {"op": "postprocess.reduce", "params": {"k": 4}, "inputs": ["top", "titles"]},
}}
