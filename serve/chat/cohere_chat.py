"""Cohere's chat API: ``POST /v2/chat`` (``cohere.ClientV2().chat`` and ``chat_stream``).

The same two kinds of ``model`` as OpenAI's ``/v1/chat/completions`` (``chat.chat_target``): a
served language model, or a flow that answers (``rag``), whose numbered sources become Cohere's
``citations``: each ``[1]`` in the answer cites the document it numbers (``type: document``, the
docno as ``id``); an answer without markers (``rag``'s short style) is cited whole by its sources.
The body is converted to OpenAI's and runs the same code; only the shapes differ. Streamed, the
events are Cohere's: ``message-start``, ``content-start``, ``content-delta`` (a flow's answer as
the model writes it), ``content-end``, a ``citation-start``/``citation-end`` pair per citation,
and ``message-end`` with ``finish_reason`` and ``usage`` (or ``ERROR`` and the error, once
headers are sent).

With ``documents``, the answer comes from the documents sent instead of a search
(serve/chat/grounded.py), with either kind of model, and citations show them as sent. Refused with a
422 naming the field: ``tools`` and ``tool_choice``, ``index`` beside ``documents``, a field Cohere's API does not
have, and a number or boolean of another JSON type (``CohereChatRequest``). ``safety_mode``, ``thinking``,
``strict_tools`` and ``priority`` are accepted and not used; a ``response_format`` other than text and ``logprobs:
true`` are refused as on ``/v1/chat/completions`` (the client would wait for JSON or log probabilities), and ``k``
(top-k) above 0, which the engines do not take.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from typing import Any, AsyncIterator, Literal

from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from flows.spec import FlowSpec
from operators.generate.answer_stream import rest_of
from operators.llm.chat_reply import ChatReply, StreamError
from serve.chat import chat, chat_flows, grounded
from serve.http import client_gone
from serve import service as svc
from serve.http.errors import ApiError
from serve.http.event_stream import EventStream
from serve.chat.grounded import CohereDocument
from serve.schemas import ModelCard

#: Cohere's finish reasons; a flow's reply that is no answer ("No answer could be written (...)": ``answered`` false
#: on the OpenAI route) ends ``ERROR``, so a Cohere client can leave it out of the messages it sends next.
FINISH = {"stop": "COMPLETE", "length": "MAX_TOKENS", "unanswered": "ERROR"}
_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


class CitationOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mode: Literal["FAST", "ACCURATE", "OFF", "ENABLED", "DISABLED"] | None = Field(
        None, description="OFF or DISABLED: no citations; otherwise a flow's answer cites its sources.")


class CohereChatRequest(BaseModel):
    """Cohere v2's chat body, as strict as Cohere's API: a field it does not have is a 422 naming it (Cohere's
    ``unknown field``; a misspelt ``max_token`` was ignored), and numbers and booleans are strict (``max_tokens: "3"``,
    ``3.0`` or ``true``, ``stream: "true"`` are refused, not read), as on ``/v1/chat/completions``. Cohere's fields
    that ask for nothing these models give (``safety_mode``, ``thinking``...) are accepted and not used; ``k``
    (top-k), which would change the answer, only as 0. A number is finite, as on ``/v1/chat/completions``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str = Field(min_length=1, description="A served language model or a flow that answers, such as 'rag' "
                       "(GET /v1/models lists both).")
    messages: list[chat.ChatMessage] = Field(min_length=1, description="The conversation, oldest first; content is "
                                             "text or a list of {type: text, text} parts.")
    stream: bool = Field(False, strict=True, description="Answer as Cohere's server-sent events.")
    documents: list[str | CohereDocument] | None = Field(
        None, min_length=1, description="Answer from these documents instead of an index (serve/chat/grounded.py): "
        "strings, or {id, data} objects whose data has text (or snippet, content, body), title, url.")
    tools: list[Any] | None = Field(None, description="Not supported: must be absent.")
    citation_options: CitationOptions | None = None
    max_tokens: int | None = Field(None, gt=0, strict=True)
    stop_sequences: list[str] | None = Field(None, max_length=5)
    temperature: float | None = Field(None, ge=0, le=2, strict=True)
    seed: int | None = Field(None, ge=-2**63, le=2**63 - 1, strict=True)  # 64 bits, as OpenAI's
    frequency_penalty: float | None = Field(None, ge=0, le=1, strict=True)
    presence_penalty: float | None = Field(None, ge=0, le=1, strict=True)
    p: float | None = Field(None, ge=0.01, le=0.99, strict=True, description="Top-p sampling (OpenAI's top_p).")
    k: int | None = Field(None, ge=0, le=500, strict=True, description="Only 0 (Cohere's default: no top-k): the "
                          "engines here sample by p.")
    tool_choice: Any = Field(None, description="Not supported, as tools: must be absent.")
    strict_tools: bool | None = Field(None, strict=True, description="Accepted, not used (no tools).")
    response_format: dict[str, Any] | None = Field(None, description="Only {'type': 'text'}: the answer is text.")
    safety_mode: str | None = Field(None, description="Accepted, not used.")
    logprobs: bool | None = Field(None, strict=True, description="Refused when true: no log probabilities here.")
    thinking: dict[str, Any] | None = Field(None, description="Accepted, not used: these models do not think apart.")
    priority: int | None = Field(None, strict=True, description="Accepted, not used.")
    index: str | None = Field(None, description="Flows only (not Cohere's): the index to search, a name under the "
                              "service's index folders; default: the app's default index.")

    @field_validator("messages")
    @classmethod
    def _text_only(cls, messages: list[chat.ChatMessage]) -> list[chat.ChatMessage]:
        chat.text_only(messages)  # an image part: a 400 naming it, as on /v1/chat/completions
        return messages

    @field_validator("stop_sequences")
    @classmethod
    def _stop_sequences(cls, value: list[str] | None) -> list[str] | None:
        return chat.check_stop(value)  # ``openai`` copies them into OpenAI's body past its check

    @field_validator("response_format")
    @classmethod
    def _text_answers(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return chat.text_answers_only(value)

    @field_validator("logprobs")
    @classmethod
    def _no_logprobs(cls, value: bool | None) -> bool | None:
        return chat.no_logprobs(value, "logprobs")  # the SDK's response.logprobs was None

    @field_validator("k")
    @classmethod
    def _no_top_k(cls, value: int | None) -> int | None:
        if value:  # k: 1 asks for the likeliest token each time; it was dropped, the answer sampled from them all
            raise ValueError(f"top-k sampling (k: {value}) is not supported: the engines here sample by p; leave k "
                             "out or send 0")
        return value

    @field_validator("tools", "tool_choice")
    @classmethod
    def _no_tools(cls, value: Any, info: ValidationInfo) -> None:
        if value:
            raise ValueError(f"{info.field_name} is not supported here: these models answer in text and call no "
                             "tools")
        return None

    def openai(self) -> chat.ChatRequest:
        """The same request in OpenAI's shape (the usage asked for in the stream); its stop sequences as they are
        (Cohere takes 5, OpenAI's body 4: the engines take any number)."""
        return chat.ChatRequest(
            model=self.model, messages=self.messages, stream=self.stream, temperature=self.temperature,
            top_p=self.p, max_tokens=self.max_tokens, seed=self.seed,
            presence_penalty=self.presence_penalty, frequency_penalty=self.frequency_penalty, index=self.index,
            stream_options=chat.StreamOptions(include_usage=True) if self.stream else None,
        ).model_copy(update={"stop": self.stop_sequences})

    def cites(self) -> bool:
        return self.citation_options is None or self.citation_options.mode not in ("OFF", "DISABLED")


async def respond(body: CohereChatRequest, target: ModelCard | FlowSpec, handle: Any, tenant: str) -> Any:
    """Cohere's chat response (or a ``StreamingResponse`` of its events) from a served model or a flow."""
    request, rid = body.openai(), str(uuid.uuid4())
    rows = shown = None
    if body.documents:
        rows, shown = grounded_rows(body)
        target = grounded.answer_path(target)
    if isinstance(target, ModelCard):
        events = chat.engine_events(handle, target, request)
        if not body.stream:
            reply = ChatReply()
            reply.read(await chat.whole_answer(events, target))
            return response(rid, reply.text, reply.finish_reason, reply.prompt_tokens, reply.completion_tokens, [])
        return _streaming(_model_events(rid, chat.sse(await chat.opened(events, target), target)))
    prepared, table = await asyncio.to_thread(chat_flows.prepare_flow, target, request, tenant, rows,
                                              {"stop": "stop_sequences", "top_p": "p"})
    answers = svc.current().answers
    if not body.stream:
        done = await client_gone.answered(answers, lambda cancel: chat_flows.run_flow(prepared, table, cancel=cancel))
        text = done["answer"]
        return response(rid, text, _finish(done), done["usage"]["prompt_tokens"],
                        done["usage"]["completion_tokens"],
                        citations(text, done["message"]["sources"], shown) if body.cites() else [])
    return answers.stream(_flow_events(rid, prepared, table, body.cites(), shown))


def grounded_rows(body: CohereChatRequest) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The documents' rows and how citations show them; with ``index`` too, or more documents than a result may
    hold, a 4xx naming the field."""
    if body.index is not None:
        raise ApiError(422, "index: documents take the place of an index's search; send one or the other",
                       param="index", code="invalid_value")
    limit = svc.current().limits.max_result_rows
    if len(body.documents or []) > limit:
        raise ApiError(413, f"documents: {len(body.documents or [])} documents, over the limit max_result_rows="
                       f"{limit}", param="documents", code="max_result_rows")
    return grounded.document_rows(body.documents or [])


def _finish(done: dict[str, Any]) -> str:
    """A flow's reply's finish reason (a key of ``FINISH``)."""
    return done["finish_reason"] if done.get("answered", True) else "unanswered"


def response(rid: str, text: str, finish: str | None, prompt: int, completion: int,
             cited: list[dict[str, Any]]) -> dict[str, Any]:
    """Cohere v2's chat response."""
    message: dict[str, Any] = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    if cited:
        message["citations"] = cited
    return {"id": rid, "finish_reason": FINISH.get(finish or "stop", "COMPLETE"), "message": message,
            "usage": usage(prompt, completion)}


def usage(prompt: int, completion: int) -> dict[str, Any]:
    tokens = {"input_tokens": prompt, "output_tokens": completion}
    return {"billed_units": dict(tokens), "tokens": tokens}


def citations(text: str, sources: list[dict[str, Any]],
              shown: dict[str, dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Cohere citations of a flow's answer: each ``[1]`` marker with the documents it numbers; without markers,
    the whole answer with all its sources. ``shown``: documents sent with the request, cited as they were sent."""
    def source(record: dict[str, Any]) -> dict[str, Any]:
        document = (shown or {}).get(record["docno"]) or {
            "id": record["docno"], "reference": record["reference"],
            **{key: record[key] for key in ("title", "url") if record.get(key)}}
        return {"type": "document", "id": record["docno"], "document": document}

    numbered = {record.get("number"): record for record in sources}
    found = []
    for marker in _MARKER.finditer(text):
        cited = [numbered[n] for n in map(int, re.findall(r"\d+", marker.group(1))) if n in numbered]
        if cited:
            found.append({"start": marker.start(), "end": marker.end(), "text": marker.group(0),
                          "sources": [source(record) for record in cited], "type": "TEXT_CONTENT"})
    if not found and sources and text:
        found = [{"start": 0, "end": len(text), "text": text, "sources": [source(r) for r in sources],
                  "type": "TEXT_CONTENT"}]
    return found


def _event(kind: str, **fields: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n"


def _streaming(events: AsyncIterator[str]) -> StreamingResponse:
    return EventStream(events)


def _opening(rid: str) -> list[str]:
    return [_event("message-start", id=rid, delta={"message": {"role": "assistant", "content": [],
                                                               "tool_calls": [], "citations": []}}),
            _event("content-start", index=0, delta={"message": {"content": {"type": "text", "text": ""}}})]


def _text(piece: str) -> str:
    return _event("content-delta", index=0, delta={"message": {"content": {"text": piece}}})


def _closing(finish: str, prompt: int, completion: int, cited: list[dict[str, Any]],
             error: str | None = None) -> list[str]:
    events = [_event("content-end", index=0)]
    for number, citation in enumerate(cited):
        events += [_event("citation-start", index=number, delta={"message": {"citations": citation}}),
                   _event("citation-end", index=number)]
    end: dict[str, Any] = {"finish_reason": finish, "usage": usage(prompt, completion)}
    if error is not None:
        end["error"] = error
    return [*events, _event("message-end", delta=end)]


async def _flow_events(rid: str, prepared: Any, table: Any, cites: bool,
                       shown: dict[str, dict[str, Any]] | None) -> AsyncIterator[str]:
    """A flow's answer as Cohere's events: its pieces as the model writes them, the rest and its citations."""
    for event in _opening(rid):
        yield event
    written = ""
    try:
        async for item in chat_flows.answer_events(prepared, table):
            if isinstance(item, str):
                written += item
                yield _text(item)
                continue
            answer, message = item["answer"], item["message"]
            rest = rest_of(answer, answer, written, bool(message.get("degraded")))
            if rest:
                written += rest
                yield _text(rest)
            cited = citations(written, message["sources"], shown) if cites else []
            for event in _closing(FINISH[_finish(item)], item["usage"]["prompt_tokens"],
                                  item["usage"]["completion_tokens"], cited):
                yield event
    except ApiError as err:  # headers are sent: the error ends the message
        for event in _closing("ERROR", 0, 0, [], error=err.message):
            yield event


async def _model_events(rid: str, openai_events: AsyncIterator[str]) -> AsyncIterator[str]:
    """A served model's OpenAI events (``chat.sse``) as Cohere's."""
    for event in _opening(rid):
        yield event
    reply = ChatReply()
    async for event in openai_events:
        pieces: list[str] = []
        try:
            reply.read(event, pieces.append)
        except StreamError as err:
            for closing in _closing("ERROR", reply.prompt_tokens, reply.completion_tokens, [], error=str(err)):
                yield closing
            return
        for piece in pieces:
            yield _text(piece)
    for event in _closing(FINISH.get(reply.finish_reason or "stop", "COMPLETE"), reply.prompt_tokens,
                          reply.completion_tokens, []):
        yield event
