"""What calls of a step record besides their rows: per-query metadata (summaries, ``degraded`` marks) and usage.

Why it is not the operator's own state: one operator instance serves every run of a shared ``Flow``, on
any number of threads; each executor call records into notes of its own (``Operator.recording`` holds
them in ``RECORDING`` for its block), and the runner merges the marks of several batches or steps
(``joined_degraded``).
"""

from __future__ import annotations

from typing import Any

from operators.thread_value import ThreadValue


class StepNotes:
    """What calls of a step recorded besides their rows: per-query metadata and usage counters (see the module
    docstring for why they are not the operator's own state)."""

    def __init__(self) -> None:
        self.metadata: dict[str, dict[str, Any]] = {}
        self.usage: dict[str, float] = {}
        self.degraded_logged = 0  # queries of this call whose degradation was logged as a warning

    def drain_metadata(self) -> dict[str, dict[str, Any]]:
        drained, self.metadata = self.metadata, {}
        return drained

    def drain_usage(self) -> dict[str, float]:
        drained, self.usage = self.usage, {}
        return drained


#: The notes this thread's calls of an operator record into (``Operator.recording``): (operator, notes).
#: Typed ``object``: ``operators.base`` imports this module, not the other way round.
RECORDING: ThreadValue[tuple[object, StepNotes]] = ThreadValue()


def joined_degraded(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """Two ``degraded`` marks of one query as one: the same step's (two of its rows, or its rows in two batches)
    add their failures and keep the first reason; two steps' are both named, with both reasons, so a later
    step's failure does not hide an earlier one's (``Operator.mark_degraded``, ``flows.runner.merge_metadata``).
    A mark that already joins steps (``step: "a, b"``, ``reason: "a: ...; b: ..."``) is joined step by step: each
    step is named once, its reason once."""
    failures = old.get("failures", 1) + new.get("failures", 1)
    reasons = _reasons_by_step(old)
    for step, reason in _reasons_by_step(new).items():
        reasons.setdefault(step, reason)
    if len(reasons) == 1:
        return {**old, "failures": failures}
    return {"step": ", ".join(reasons), "failures": failures,
            "reason": "; ".join(f"{step}: {reason}" for step, reason in reasons.items())}


def _reasons_by_step(mark: dict[str, Any]) -> dict[str, Any]:
    """``{step: reason}`` of a mark: one step's, or each of a joined mark's (step ids hold no comma, so its
    ``step`` splits at ", ", and its reason at each next step's "; <step>: ")."""
    steps = str(mark.get("step")).split(", ")
    reason = mark.get("reason")
    if len(steps) == 1:
        return {steps[0]: reason}
    text, reasons = str(reason), {}
    for step, after in zip(steps, [*steps[1:], None]):
        text = text.removeprefix(f"{step}: ")
        cut = text.find(f"; {after}: ") if after else -1
        reasons[step], text = (text, "") if cut < 0 else (text[:cut], text[cut + 2:])
    return reasons
