"""What calls of a step record besides their rows: per-query metadata (summaries, ``degraded`` marks) and usage.

Why it is not the operator's own state: one operator instance serves every run of a shared ``Flow``, on
any number of threads; each executor call records into notes of its own (``Operator.recording`` holds
them in ``RECORDING`` for its block), and the runner merges the marks of several batches or steps
(``joined_degraded``). ``StepRecording``, a base of ``Operator``, is how a step records into them.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from operators.thread_value import ThreadValue

#: Per-query metadata every step may add to: joined across steps, never overwritten (``flows.runner.merge_metadata``).
SHARED_METADATA = frozenset({"usage", "degraded"})


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


class StepRecording:
    """How an operator records into its notes (a base of ``Operator``): per-query metadata, ``degraded`` marks and
    usage, into this thread's ``recording`` block's notes or else the instance's own (``Operator._own_notes``)."""

    @contextlib.contextmanager
    def recording(self) -> Iterator[StepNotes]:
        """Within this block, on this thread, what this operator records (``emit_metadata``, ``record_usage``,
        ``mark_degraded``) goes to fresh notes of this call, not to the instance that other runs share."""
        notes = StepNotes()
        with RECORDING.holding((self, notes)):
            yield notes

    def notes(self) -> StepNotes:
        """Where a record goes now: the notes of this thread's ``recording`` block, else the instance's own."""
        held = RECORDING.get()
        return held[1] if held is not None and held[0] is self else self._own_notes

    def metadata_keys(self) -> frozenset[str]:
        """The per-query metadata keys this step writes (``emit_metadata``) besides the shared ``usage`` and
        ``degraded``. Two steps of a flow that write the same key are refused when it is built: the later would
        overwrite the earlier's value for every query. Empty: none, or undeclared (a plugin's), which is not checked."""
        return frozenset()

    def no_rows_metadata(self) -> dict[str, Any]:
        """The metadata of a query none of whose rows reached this step (a search that found nothing), which the
        executors record for it, as they know which queries a step saw: none by default. A step whose result is the
        query's metadata says here what such a query gets (``generate.answer``: its decline), not calling itself."""
        return {}

    def emit_metadata(self, qid: str, key: str, value: Any) -> None:
        """Record a per-query output (a summary, an aggregate); lands in ``FlowResult.metadata``."""
        declared = self.metadata_keys()
        if declared and key not in declared and key not in SHARED_METADATA:
            raise RuntimeError(f"{self.name} writes the query metadata '{key}', which its metadata_keys() does "
                               "not name: add it there, so a flow that has another writer of it is refused")
        self.notes().metadata.setdefault(str(qid), {})[key] = value

    def mark_degraded(self, qid: str, reason: str) -> None:
        """Mark query ``qid`` degraded by this step (it keeps its input; it is not cached). Later failures of the
        same query in this step add to ``failures``; the reason stays the first one's."""
        earlier = self.notes().metadata.get(str(qid), {}).get("degraded")
        mark = {"step": self.step_id, "reason": reason}
        self.emit_metadata(qid, "degraded", joined_degraded(earlier, mark) if earlier else mark)

    def drain_metadata(self) -> dict[str, dict[str, Any]]:
        """Hand over and forget what ``emit_metadata`` recorded (in this ``recording`` block, else outside any)."""
        return self.notes().drain_metadata()

    def record_usage(self, **counts: float) -> None:
        """Add to this step's counters (model calls, tokens, seconds); they land in its ``StepRecord.usage``."""
        usage = self.notes().usage
        for name, value in counts.items():
            usage[name] = usage.get(name, 0) + value

    def drain_usage(self) -> dict[str, float]:
        """Hand over and forget what ``record_usage`` added (in this ``recording`` block, else outside any)."""
        return self.notes().drain_usage()
