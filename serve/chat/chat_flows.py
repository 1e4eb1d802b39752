"""``POST /v1/chat/completions`` with ``model`` = a flow that answers (``rag``): retrieval-augmented chat in
OpenAI's shape.

A flow answers when one of its steps is ``generate.answer``; ``GET /v1/models`` lists the
built-in and the caller's saved flows that do (``type: flow``). The last user message is
the question; the messages before it travel as the query's ``messages`` column when the
flow has a step that reads a conversation (``query.contextualize``, as ``rag`` does, or
``retrieve.messages``: follow-up questions). ``temperature``, ``seed`` and
``max_tokens`` go to the flow's steps that ask a language model with them (``Operator.calls_model``); a
non-standard ``index`` field (the ``openai`` client's ``extra_body``) picks the index, confined like every request's.
The flow runs in this replica on the local executor, as ``/v1/search`` does, and the
answer comes back as one ``chat.completion``, or with ``stream: true`` as
``chat.completion.chunk`` events: the answer as the model writes it
(``operators.generate.answer_stream``), then its references and the message's fields once the
flow has run; a client that closes the stream cancels the flow. The message's ``content`` is the
answer followed by its numbered references; its ``sources`` field holds the same references as
records (number, docno, title, url). A reply that is no answer ("No answer could be written (...)") has none: they
would read as supporting it. ``n`` choices are ``n`` answers from one search (serve/chat/flow_choices.py).
Cohere's ``/v2/chat`` (serve/chat/cohere_chat.py) runs flows through the same functions and gives the answer its own
shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pyarrow as pa

from flows import store as flow_store
from flows.progress import CancelToken
from flows.spec import FlowSpec
from operators.errors import FlowCancelled, SpecError, TesseraError
from operators.generate.answer_stream import ANSWER_OP, Sink, rest_of, streaming_answers
from operators.unicode import blank
from serve.http import client_gone, errors
from serve.runs import flow_status
from serve.http.threads import in_pool
from serve import service as svc
from serve.chat.flow_answer import flow_result, message
from serve.chat.flow_choices import choice_qid, run_choices, split_at_answer, summed_usage
from serve.http.errors import ApiError
from serve.runs.online import queries_table
from serve.runs.flow_resolution import FlowFile, flow_owner, load_spec
from serve.schemas import ModelCard

#: The operators that read the conversation before the question from a query column (``messages_column``).
CONVERSATION_OPS = ("retrieve.messages", "query.contextualize")


def step_operators(spec: FlowSpec) -> dict[str, type]:
    """Each step's operator class, by step id."""
    from operators.registry import get_operator

    return {step_id: get_operator(step.op, step=step_id) for step_id, step in spec.steps.items()}


def answers(spec: FlowSpec) -> bool:
    """Whether the flow writes an answer (has a ``generate.answer`` step)."""
    return any(cls.name == ANSWER_OP for cls in step_operators(spec).values())


def answering_flows(tenant: str) -> list[str]:
    """The built-in and the tenant's saved flows that answer, by name (a flow that fails to load is left out)."""
    return list(_answering_files(tenant))


def _answering_files(tenant: str) -> dict[str, FlowFile]:
    """The flows that answer (``answering_flows``), each with its file's version."""
    service, files = svc.current(), {}
    for name in [*flow_store.builtin_names(), *flow_store.saved_names(flow_owner(tenant))]:
        try:
            if name not in files and (file := service.flow_file(name, tenant)) is not None and _answers(file):
                files[name] = file
        except TesseraError:
            continue
    return files


@functools.lru_cache(maxsize=1024)
def _answers(file: FlowFile) -> bool:
    """Whether this version of a flow file answers."""
    return answers(load_spec(file))


def flow_cards(tenant: str, models: list[ModelCard] | None = None) -> list[ModelCard]:
    """``/v1/models`` entries for the flows that answer (empty when the app serves no flows). A flow this service
    cannot run is ``missing``, with the reason (``serve.runs.flow_status``, the rule ``GET /flows`` reports too); with
    the app's ``models`` and their live states, a flow whose steps run on a deployment that is not ready is not ready
    either, and says which it waits for."""
    if not svc.configured():
        return []
    service, cards, now = svc.current(), [], flow_status.versions()
    for name, file in _answering_files(tenant).items():
        if name in service.model_names:  # saved before such names were refused: a chat by it reaches the model
            continue
        card = ModelCard(id=name, type="flow", operator="flow", status="ready")
        deployments = _deployments(service, file, now)
        waiting = [model for model in models or [] if model.deployment in deployments and model.status != "ready"]
        if problem := flow_status.file_problem(service, file, now):  # rag_gold: needs tessera bench's dataset
            card = card.model_copy(update={"status": "missing", "reason": problem})
        elif waiting:
            card = card.model_copy(update={"status": waiting[0].status, "reason": "; ".join(
                f"runs on model '{m.id}', which is {m.status}" + (f" ({m.reason})" if m.reason else "")
                for m in waiting)})
        cards.append(card)
    return cards


@functools.lru_cache(maxsize=1024)
def _deployments(service: svc.Service, file: FlowFile, versions: tuple[Any, ...]) -> frozenset[str]:
    """The deployments of ``service`` that a flow's steps run on, kept per version of what placing reads (the flow's
    file and the models files, ``flow_status.versions``): building and placing the flows took nearly all of a
    ``/v1/models`` call (24 ms of CPU a call, 0.6 ms kept; ``benchmarks/service_prepare.py``). Nothing else they
    read changes while the app serves: its deployments are fixed when it starts."""
    placed = service.place(load_spec(file))
    return frozenset(step.placement.deployment for step in placed.steps.values() if step.placement is not None)


def find_flow(model: str, tenant: str) -> FlowSpec | None:
    """The flow ``model`` names, if it answers; None when no flow has that name; a 404 when it does not answer."""
    spec = svc.current().flow_spec(model, tenant) if svc.configured() else None
    if spec is None:  # none, or deleted while it was read
        return None
    if not answers(spec):
        runnable = [c.id for c in flow_cards(tenant) if c.status != "missing"]  # what /v1/models offers
        raise ApiError(404, f"flow '{model}' gives no answer (it has no {ANSWER_OP} step); flows that answer: "
                       f"{', '.join(runnable) or 'none'}", param="model", code="model_not_found")
    return spec


def _question(request: Any) -> tuple[str, list[dict[str, str]]]:
    """The last user message's text (the flow's query: at most ``max_query_chars``) and the messages before it
    (each cut to a few thousand characters by the step that reads them)."""
    for position in range(len(request.messages) - 1, -1, -1):
        if request.messages[position].role == "user":
            earlier = [{"role": m.role, "content": m.text()} for m in request.messages[:position]]
            question, longest = request.messages[position].text().strip(), svc.current().limits.max_query_chars
            if len(question) > longest:
                raise ApiError(422, f"messages: the last user message is the flow's query and has {len(question)} "
                               f"characters, over the limit max_query_chars={longest}", param="messages",
                               code="max_query_chars")
            if not blank(question):
                return question, earlier
            break
    raise ApiError(422, "messages: a flow answers the last user message, and there is no user message with text",
                   param="messages", code="invalid_value")


def _with_options(spec: FlowSpec, request: Any) -> FlowSpec:
    """``spec`` with the request's ``temperature``/``seed``/``max_tokens`` on the steps that ask a model with them (a
    seed: the same request samples the same answer again; ``n`` choices get seed + 1, ..., ``operators.llm.seeds``)."""
    options = {"temperature": request.temperature, "seed": request.seed,
               "max_tokens": request.max_completion_tokens or request.max_tokens}
    options = {key: value for key, value in options.items() if value is not None}
    if not options:
        return spec
    steps = dict(spec.steps)
    for step_id, cls in step_operators(spec).items():
        given = {k: v for k, v in options.items() if k in cls.Params.model_fields}
        if given and _asks_model(cls, step_id, steps[step_id].params):
            steps[step_id] = steps[step_id].model_copy(update={"params": {**steps[step_id].params, **given}})
    return spec.model_copy(update={"steps": steps})


def _asks_model(cls: type, step_id: str, params: dict[str, Any]) -> bool:
    """Whether the step, made with its own params, asks a model (``Operator.calls_model``): ``rag``'s
    ``query.contextualize`` with ``method: history`` has a ``max_tokens`` but calls none, and a request's
    ``max_tokens`` over its bound was refused in that step's name, not the answer's. Params that do not validate
    are ``prepare``'s to refuse, as the flow's own."""
    try:
        return cls(params, step_id=step_id).calls_model()
    except TesseraError:
        return False


def _as_request_field(err: SpecError | ApiError, request: Any) -> Exception:
    """A step's refusal of an option the request gave it (``max_tokens`` over what the step allows, or over what
    JSON carries: ``param_numbers``' ``ApiError``) as a 422 naming the request's field: the client sent no
    ``steps.<id>.params.max_tokens``. Any other error as it is, also one of a value that ``params`` gave the step
    (``{"answer.max_tokens": "lots"}`` was "max_tokens: the flow's step 'answer' refuses None")."""
    fields = {"temperature": "temperature", "seed": "seed",
              "max_tokens": "max_completion_tokens" if request.max_completion_tokens else "max_tokens"}
    where = (err.field if isinstance(err, SpecError) else err.param) or ""
    step, _, option = where.removeprefix("steps.").partition(".params.")
    if not where.startswith("steps.") or option not in fields or getattr(request, fields[option]) is None \
            or f"{step}.{option}" in (getattr(request, "params", None) or {}):
        return err
    field, why = fields[option], err.message.removeprefix(f"{where}: ")
    code = err.code if isinstance(err, ApiError) and err.code else "invalid_value"
    return ApiError(422, f"{field}: the flow's step '{step}' refuses {getattr(request, field)!r}: {why}",
                    param=field, code=code)


#: Sampling options of a chat that a flow's steps take none of (they take ``temperature``, ``seed``, ``max_tokens``),
#: each with the value that asks for nothing: another was dropped without a word, the answer not what was asked for.
NOT_FLOW_OPTIONS = {"top_p": 1, "presence_penalty": 0, "frequency_penalty": 0}


def prepare_flow(spec: FlowSpec, request: Any, tenant: str, documents: list[dict[str, Any]] | None = None,
                 fields: dict[str, str] | None = None) -> tuple[svc.Prepared, pa.Table]:
    """The flow validated, its index confined and its models placed (a 4xx here, before any answer starts), and
    its input: the question with the conversation columns the flow reads, or with ``documents`` (rows with
    ``docno``, ``title``, ``text``) the question's rows over those documents, ranked as given. Stop sequences are
    refused: a flow's answer step parses its reply (labels, citations, sources) and takes none, so they would be
    ignored without a word; so is a sampling option of ``NOT_FLOW_OPTIONS``, and ``n`` above 1 for a flow that cannot
    answer ``n`` times from one search (``flow_choices.split_at_answer``). ``fields`` names the options as the
    client's body does (Cohere's: ``{"stop": "stop_sequences", "top_p": "p"}``)."""
    fields = fields or {}
    stop_field = fields.get("stop", "stop")
    for option, neutral in NOT_FLOW_OPTIONS.items():
        if getattr(request, option) not in (None, neutral):
            field = fields.get(option, option)
            raise ApiError(422, f"{field}: a flow's steps take only temperature, seed and max_tokens, so {field} "
                           f"would be ignored; send it without {field}, or ask a served model", param=field,
                           code="unsupported_parameter")
    if request.stop:
        raise ApiError(422, f"{stop_field}: a flow's answer takes no stop sequences (its answer step reads the "
                       "model's whole reply); send it without them, or ask a served model", param=stop_field,
                       code="unsupported_parameter")
    question, earlier = _question(request)
    body = {"flow": _with_options(spec, request).to_dict(), "query": question}
    if request.index is not None:
        body["index"] = request.index
    if getattr(request, "params", None):  # OpenAI's body only (extra_body), checked as /v1/search's
        body["params"] = request.params
    try:
        prepared = svc.current().prepare(body, tenant)
    except (SpecError, ApiError) as err:
        raise _as_request_field(err, request) from None
    if getattr(request, "n", 1) > 1:  # OpenAI's body only: n answers from one search, if the flow can be cut so
        split_at_answer(prepared.flow)
    if documents is not None:
        qid = prepared.queries[0]["qid"]
        return prepared, pa.Table.from_pylist([{"qid": qid, "query": question, **row, "score": 1.0 / rank,
                                                "rank": rank} for rank, row in enumerate(documents, 1)])
    columns = {prepared.spec.steps[step_id].params.get("messages_column", "messages")
               for step_id, cls in step_operators(prepared.spec).items() if cls.name in CONVERSATION_OPS}
    return prepared, queries_table(prepared, {column: [json.dumps(earlier)] for column in sorted(columns)})


def run_flow(prepared: svc.Prepared, table: pa.Table,
             sink: Sink | None = None, cancel: CancelToken | None = None) -> dict[str, Any]:
    """Run the prepared flow over ``table``; the assistant message, the usage and the answer (``sink`` gets the
    answer as it is written; ``cancel`` stops the flow). A failure the request's flow causes is the 4xx of
    ``run_online`` (a corpus file it names that is not there); any other a 500 naming the flow."""
    with streaming_answers(sink) if sink is not None else contextlib.nullcontext():
        result = flow_result(prepared, table, cancel)
    return _message(result, prepared.queries[0]["qid"])


def _message(result: Any, qid: str) -> dict[str, Any]:
    """The reply to the query ``qid`` of a flow's result (``flow_answer.message``)."""
    return message(result.table, result.metadata.get(qid, {}), qid)


async def flow_response(spec: FlowSpec, request: Any, tenant: str) -> Any:
    """The flow's answer as OpenAI's ``chat.completion``, or a ``StreamingResponse`` of its chunks; ``n`` choices are
    ``n`` answers from one search (serve/chat/flow_choices.py), their usage summed."""
    prepared, table = await asyncio.to_thread(prepare_flow, spec, request, tenant)
    head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": request.model}
    answers, n = svc.current().answers, getattr(request, "n", 1)
    if not request.stream:
        choices = await client_gone.answered(answers, lambda cancel: answer_choices(prepared, table, n, cancel=cancel))
        return {**head, "object": "chat.completion", "usage": summed_usage(choices),
                "choices": [{"index": i, "message": choice["message"], "finish_reason": choice["finish_reason"]}
                            for i, choice in enumerate(choices)]}
    usage = bool(request.stream_options and request.stream_options.include_usage)
    return answers.stream(_chunks(head, prepared, table, usage, n))


def answer_choices(prepared: svc.Prepared, table: pa.Table, n: int, sink: Callable[[int, str], None] | None = None,
                   cancel: CancelToken | None = None) -> list[dict[str, Any]]:
    """``n`` answers (what ``run_flow`` returns, each); ``sink`` gets ``(choice index, text)`` as each is written."""
    qid = prepared.queries[0]["qid"]
    index = {qid: 0} if n == 1 else {choice_qid(qid, i): i for i in range(n)}
    by_qid = None if sink is None else (lambda written_qid, text: sink(index.get(written_qid, 0), text))
    if n == 1:
        return [run_flow(prepared, table, by_qid, cancel)]
    return run_choices(prepared, table, n, by_qid, cancel)


async def _chunks(head: dict[str, Any], prepared: svc.Prepared, table: pa.Table,
                  include_usage: bool, n: int = 1) -> AsyncIterator[str]:
    """Server-sent events: each choice's role at once, its answer as it is written, the rest of its content and the
    message's fields once the flow has run, with ``include_usage`` an event of the usage and no choices (as
    OpenAI sends it), then [DONE]. Each event holds one choice, named by its ``index``, as OpenAI's do for ``n``."""
    def event(index: int, delta: dict[str, Any], finish: str | None = None) -> str:
        chunk = {**head, "object": "chat.completion.chunk",
                 "choices": [{"index": index, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(chunk)}\n\n"

    for index in range(n):
        yield event(index, {"role": "assistant", "content": ""})
    sent = [""] * n
    try:
        async for item in _choice_events(prepared, table, n):
            if isinstance(item, tuple):
                index, piece = item
                sent[index] += piece
                yield event(index, {"content": piece})
                continue
            for index, choice in enumerate(item):
                message = choice["message"]
                yield event(index, {"content": rest_of(message["content"], choice["answer"], sent[index],
                                                       bool(message.get("degraded")))})
                yield event(index, {key: message[key] for key in ("sources", "documents", "degraded",
                                                                  "standalone_query", "abstained", "answered")
                                    if key in message}, choice["finish_reason"])
            if include_usage:
                chunk = {**head, "object": "chat.completion.chunk", "choices": [], "usage": summed_usage(item)}
                yield f"data: {json.dumps(chunk)}\n\n"
    except ApiError as err:  # headers are sent: the error travels as an event, in OpenAI's shape
        yield errors.error_event(err)
        return
    yield "data: [DONE]\n\n"


async def answer_events(prepared: svc.Prepared, table: pa.Table) -> AsyncIterator[str | dict[str, Any]]:
    """The flow run for a streamed answer: each piece of the answer (a str) as the model writes it, then what
    ``run_flow`` returns (a dict). A failure raises its ``ApiError``."""
    async for item in _choice_events(prepared, table, 1):
        yield item[1] if isinstance(item, tuple) else item[0]


async def _choice_events(prepared: svc.Prepared, table: pa.Table,
                         n: int) -> AsyncIterator[tuple[int, str] | list[dict[str, Any]]]:
    """The flow run for ``n`` streamed answers: each piece as ``(choice index, text)`` as the model writes it, then
    what ``answer_choices`` returns. A failure raises its ``ApiError``."""
    loop, pieces, cancel = asyncio.get_running_loop(), asyncio.Queue(), CancelToken()

    async def run() -> list[dict[str, Any]]:
        try:
            return await in_pool(svc.current().answers.pool, answer_choices, prepared, table, n,
                                 lambda index, text: loop.call_soon_threadsafe(pieces.put_nowait, (index, text)),
                                 cancel)
        finally:
            pieces.put_nowait(None)  # after the pieces: the thread scheduled them before it returned

    running = asyncio.ensure_future(run())
    # Its failure read at once, whoever awaits it or not (a stream left unread, finalized late): asyncio logged "Task
    # exception was never retrieved" with three tracebacks of an expected FlowCancelled.
    running.add_done_callback(lambda done: done.cancelled() or done.exception())
    try:
        while (piece := await pieces.get()) is not None:
            yield piece
        try:
            choices = await running
        except FlowCancelled as err:  # Serve cancelled the model's call as the client left, before this handler:
            raise client_gone.stopped(err) from None  # an event, not an exception out of a started stream
        yield choices
    finally:  # the client went away before the end: stop the flow (the embedded model stops between tokens)
        if not running.done():
            cancel.cancel(client_gone.GONE)
