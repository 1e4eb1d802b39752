"""OpenAI's ``n`` for a flow: one search, ``n`` answers to it.

A client that asks ``/v1/chat/completions`` for ``n`` choices expects ``n`` answers to the same question, as a served
model gives them. A flow searches, then answers from what it found: running it ``n`` times would search ``n`` times
(a reranker's or a rewriting model's work each time, and a rewrite sampled above temperature 0 could find other
documents for each choice). So the flow is cut at its answer step (``generate.answer``): the steps before it run once
over the question, and the answer step with the steps after it (``generate.references``) run over ``n`` copies of its
input, one query id each (``<qid>#1`` ... ``<qid>#n``). Each choice gets its own answer and the references it cites, all
from the same documents; the metadata of the steps before the answer (``standalone_query``) is each choice's too,
and their usage counts once in the total. A request's ``seed`` is the first choice's, the next choices sample with
seed + 1, ... (``operators.llm.seeds``), as a served model's do: the same request gives the same choices, each its own.
A flow whose steps after the answer read a step before it (other than
through the answer) cannot be cut so: ``n`` above 1 is refused for it, naming the step.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import pyarrow as pa

from flows.progress import CancelToken
from flows.spec import Flow
from flows.spec_checks import ancestors
from operators.generate.answer_stream import ANSWER_OP, Sink, streaming_answers
from operators.llm.seeds import seeding_choices
from operators.tables import concat, set_column
from serve import service as svc
from serve.chat.flow_answer import flow_result, message
from serve.http.errors import ApiError


def choice_qid(qid: str, index: int) -> str:
    """The query id of choice ``index`` (from 0) of the question ``qid``."""
    return f"{qid}#{index + 1}"


def split_at_answer(flow: Flow) -> tuple[Flow | None, Flow]:
    """The flow's needed steps before its answer step (None when the answer reads the question itself: nothing to
    search), and the answer step with those after it, each a ``Flow`` of the same operators; a 422 naming ``n`` when
    the flow cannot be cut there."""
    needed = flow.needed_steps()
    answer = next((step for step in needed if flow.operators[step].name == ANSWER_OP), None)
    if answer is None:
        raise _uncut(flow, f"its output '{flow.output}' does not come from its {ANSWER_OP} step")
    before = [step for step in needed if step in ancestors(answer, flow.inputs)]
    after = [step for step in needed if step not in before]
    parents = flow.inputs[answer]
    for step in after:
        if outside := [parent for parent in flow.inputs[step] if parent in before and step != answer]:
            raise _uncut(flow, f"its step '{step}' after the answer reads '{outside[0]}', a step before it")
    if len(parents) > 1:
        raise _uncut(flow, f"its answer step '{answer}' reads several steps ({', '.join(parents)})")
    inputs = {step: (() if step == answer else flow.inputs[step]) for step in after}
    return (_part(flow, before, parents[0]) if parents else None), _part(flow, after, flow.output, inputs)


def _uncut(flow: Flow, why: str) -> ApiError:
    return ApiError(422, f"n: flow '{flow.name}' writes n answers from one search by running its answer step (and the "
                    f"steps after it) n times, and {why}; send n: 1, or ask for the choices one at a time",
                    param="n", code="unsupported_parameter")


def _part(flow: Flow, steps: list[str], output: str, inputs: dict[str, tuple[str, ...]] | None = None) -> Flow:
    """The steps ``steps`` of ``flow`` (their operators, as built) as a flow of their own ending at ``output``."""
    spec = flow.spec.model_copy(update={"steps": {step: flow.spec.steps[step] for step in steps}, "output": output})
    return Flow(spec=spec, order=steps, inputs=inputs or {step: flow.inputs[step] for step in steps},
                operators={step: flow.operators[step] for step in steps}, output=output)


def run_choices(prepared: svc.Prepared, table: pa.Table, n: int, sink: Sink | None = None,
                cancel: CancelToken | None = None) -> list[dict[str, Any]]:
    """``n`` answers of the prepared flow to its one question, each what ``chat_flows.run_flow`` returns for one
    (``sink`` gets ``(choice qid, text)`` as each is written); the usage of the steps before the answer is the first
    choice's."""
    qid, qids = prepared.queries[0]["qid"], [choice_qid(prepared.queries[0]["qid"], i) for i in range(n)]
    search, answer = split_at_answer(prepared.flow)
    with streaming_answers(sink) if sink is not None else contextlib.nullcontext():
        found = flow_result(dataclasses.replace(prepared, flow=search), table, cancel) if search else None
        rows = found.table if found is not None else table
        if rows.num_rows:
            copies = concat([set_column(rows, "qid", pa.array([choice] * rows.num_rows, pa.string()))
                             for choice in qids])
            with seeding_choices({choice: i for i, choice in enumerate(qids)}):
                answered = flow_result(dataclasses.replace(prepared, flow=answer), copies, cancel)
            rows, metadata = answered.table, answered.metadata
        else:  # nothing found: each choice is what a run of the whole flow records for a query none of whose rows
            # reached its answer step (``Operator.no_rows_metadata``: generate.answer's decline)
            declined: dict[str, Any] = {}
            for step in answer.order:
                for key, value in answer.operators[step].no_rows_metadata().items():
                    declined.setdefault(key, value)
            metadata = {choice: dict(declined) for choice in qids}
    searched = found.metadata.get(qid, {}) if found is not None else {}
    choices = []
    for i, choice in enumerate(qids):
        own = metadata.get(choice, {})
        usage = {**searched.get("usage", {}), **own.get("usage", {})} if i == 0 else own.get("usage", {})
        choices.append(message(rows, {**searched, **own, "usage": usage}, choice))
    return choices


def summed_usage(choices: list[dict[str, Any]]) -> dict[str, int]:
    """The tokens of every choice together, as OpenAI counts ``n`` choices."""
    return {key: sum(choice["usage"][key] for choice in choices)
            for key in ("prompt_tokens", "completion_tokens", "total_tokens")}
