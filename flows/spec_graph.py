"""The DAG of a flow spec: where each step's input comes from, a run order, and the output step.

Why apart from ``flows.spec``: this is graph work on step ids alone (no operators, no pydantic), done
once by ``FlowSpec.build()``; each function refuses what makes the graph unrunnable (an unknown or
repeated input, a cycle, several results) with a ``SpecError`` naming the step and the field.
"""

from __future__ import annotations

import heapq
from typing import Any, Mapping

from operators.errors import SpecError, close_names, did_you_mean


def step_inputs(steps: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """Each step's input steps (``StepSpec.inputs``; unset: the step written before it, none for the first)."""
    ids = list(steps)
    inputs: dict[str, tuple[str, ...]] = {}
    for i, (step_id, step) in enumerate(steps.items()):
        if step.inputs is None:
            inputs[step_id] = (ids[i - 1],) if i else ()
        else:
            for name in step.inputs:
                if name not in steps:
                    raise SpecError(not_a_step("input", name, ids), step=step_id, field="inputs")
                if name == step_id:
                    raise SpecError("a step cannot read its own output", step=step_id, field="inputs")
            seen: set[str] = set()
            for name in step.inputs:
                if name in seen:
                    raise SpecError(f"the input '{name}' is listed twice", step=step_id, field="inputs")
                seen.add(name)
            inputs[step_id] = tuple(step.inputs)
    return inputs


def run_order(ids: list[str], inputs: dict[str, tuple[str, ...]]) -> list[str]:
    """Spec order wherever the inputs allow it: each time, the first written step that is ready.

    Kahn's algorithm over a heap of spec positions: O(n log n) in the steps and inputs. A cycle
    is an error naming its steps.
    """
    position = {step: i for i, step in enumerate(ids)}
    waiting = {step: len(set(inputs[step])) for step in ids}
    readers: dict[str, list[str]] = {step: [] for step in ids}
    for step in ids:
        for parent in set(inputs[step]):
            readers[parent].append(step)
    ready = [position[step] for step in ids if waiting[step] == 0]
    heapq.heapify(ready)
    order: list[str] = []
    while ready:
        step = ids[heapq.heappop(ready)]
        order.append(step)
        for reader in readers[step]:
            waiting[reader] -= 1
            if waiting[reader] == 0:
                heapq.heappush(ready, position[reader])
    if len(order) < len(ids):
        done = set(order)
        remaining = {s: set(inputs[s]) - done for s in ids if s not in done}
        cycle = find_cycle(remaining)
        raise SpecError(f"the flow has a cycle: {' -> '.join(cycle)}", step=cycle[0], field="inputs")
    return order


def find_cycle(remaining: dict[str, set[str]]) -> list[str]:
    """One cycle among the steps still waiting for ``remaining`` inputs, as a path that ends where it starts."""
    start = next(iter(remaining))
    path, seen = [start], {start}
    node = start
    while True:
        node = next(iter(remaining[node]))
        if node in seen:
            return path[path.index(node):] + [node]
        path.append(node)
        seen.add(node)


def only_sink(ids: list[str], inputs: dict[str, tuple[str, ...]]) -> str:
    """The step no other step reads: the flow's output when ``output`` is unset. Where it is listed does not
    matter (a spec written back with sorted keys means the same flow); two or more such steps are an error,
    since the others would be computed for nothing."""
    read = {parent for parents in inputs.values() for parent in parents}
    sinks = [step for step in ids if step not in read]
    if len(sinks) > 1:
        raise SpecError(f"steps {', '.join(repr(s) for s in sinks)} are each read by no other step, so the flow "
                        "has no single result: combine them in one more step, or set `output` to the one you "
                        "want (the others are then skipped)", step=sinks[0], field="output")
    return sinks[0]


def not_a_step(what: str, name: Any, ids: list[str]) -> str:
    """``input 'bm26' is not a step of this flow; did you mean 'bm25'? (steps: bm25, x)``: a misspelt step id
    offered the close ones, as a misspelt operator or param is."""
    hint = did_you_mean(close_names(name, ids)) if isinstance(name, str) else ""
    return f"{what} '{name}' is not a step of this flow{hint and '; ' + hint} (steps: {', '.join(ids)})"
