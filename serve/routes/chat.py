"""Chats about a task's results (mosaicRAG's ``/task/chat/new`` and ``/task/chat/{id}``).

A chat belongs to one finished task of the caller and names a language ``model`` and the
result ``column`` to ground on. Each message runs the answer path of the ``rag`` flow
(``query.contextualize`` with the chat's earlier messages, so a follow-up stands alone, then
``generate.context`` and ``generate.answer``, issue #31's LLM gateway) through the engine over
that task's result rows, with the answer written on the app's language-model deployment when it
runs the chat's model (the service places the chat's flow as it places every flow). With
``stream=true`` the answer comes as server-sent events while the model writes it, as the chats of
``/v1/chat/completions`` do (``chat_flows.answer_events``); a client that goes away stops the flow.
The exchange is kept in the task store, and ``GET /task/{id}/chats`` reads a task's chats back. Unlike the seed, an
unknown chat id is a 404.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, AsyncIterator

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, ConfigDict, Field

from serve.chat import chat_flows
from serve.http import client_gone, errors
from serve import service as svc
from serve.http.errors import ApiError
from serve.routes.tasks import tenant
from serve.tasks.taskstore import ChatMoved

router = APIRouter(tags=["chat"])

def chat_spec(model: str, column: str) -> dict[str, Any]:
    """The flow that answers one chat message from a task's rows: the message made to stand alone from the chat
    before it (a follow-up), numbered context, then a cited answer."""
    return {"name": "chat", "steps": {
        "standalone": {"op": "query.contextualize"},
        "context": {"op": "generate.context", "params": {"text_column": column, "model": model}},
        "answer": {"op": "generate.answer", "params": {"model": model}},
    }}


@router.get("/task/chat/new", response_class=PlainTextResponse, summary="Start a chat about a finished task")
def new_chat(request: Request, task_id: str = Query(..., description="The task whose results ground the chat."),
             model: str = Query("local", description="Language model (an alias of the LLM gateway)."),
             column: str = Query("text", description="Result column the answers are grounded on.")) -> str:
    from operators.errors import close_names, did_you_mean, one_line
    from operators.llm.aliases import aliases, key_env, unknown_model
    from serve.security.spec_guard import check_llm

    if unknown_model(model, servers=False) is not None:  # said now, in the service's terms: aliases only (the
        # gateway's message offered litellm strings, which the guard below refuses)
        known = sorted(aliases())
        close = close_names(model, known)[:1]
        raise ApiError(422, f"unknown model '{one_line(model, 60)}': a task chat runs a language model by its alias ("
                       f"{', '.join(known)})" + (f"; {did_you_mean(close)}" if close else "")
                       + " (GET /v1/models lists the served models, which /v1/chat/completions answers by their id)",
                       param="model", code="model_not_found")
    check_llm(model, "model")  # an alias: a litellm string would reach its provider's default address
    if (variable := key_env(model)) is not None and not os.environ.get(variable):  # every message would be refused
        raise ApiError(422, f"model '{model}' reads ${variable}, not set where this service runs, so a chat with it "
                       "could not answer: whoever runs the service must set it, or choose another model",
                       param="model", code="env_not_set")
    service, owner = svc.current(), tenant(request)
    try:
        task = service.task(task_id, owner)
    except ApiError as err:  # named as this route's query parameter, not as the task routes' path's {id}
        err.param = "task_id" if err.code == "task_not_found" else err.param
        raise
    if task["status"] != "finished":
        raise ApiError(409, f"task {task_id} is {task['status']}; a chat needs a finished task", param="task_id",
                       code="task_not_finished")
    rows = task["result"]["data"]
    if not rows:  # an upload or a compaction writes none, a search may find none: the chat's flow has nothing to read
        raise ApiError(422, f"task {task_id} has no result rows to ground a chat on: an upload or a compaction gives "
                       "none, and so does a search that found nothing", param="task_id", code="no_result_rows")
    if column not in rows[0]:
        raise ApiError(422, f"the task's results have no column '{column}' (columns: {', '.join(rows[0])})",
                       param="column", code="invalid_value")
    return service.store.create_chat(owner, task_id, model, column)


@router.get("/task/{task_id}/chats", summary="A task's chats, oldest first, with the messages each has kept")
def task_chats(task_id: str, request: Request) -> dict[str, Any]:
    """How a client (the web UI, after a reload) reads a task's conversation back: each of the caller's chats about
    the task with its ``messages`` as ``/task/chat/{id}`` kept them, a question (``role: user``, ``content``) then its
    reply (``role: assistant``, ``answer``, ``sources``...). 404 ``Task id not found`` for another key's task, or
    none."""
    service, owner = svc.current(), tenant(request)
    service.task(task_id, owner)
    kept = service.store.task_chats(task_id, owner)
    return {"task_id": task_id, "chats": [{key: chat[key] for key in ("id", "model", "column", "created", "messages")}
                                          for chat in kept]}


def prepare_chat(chat: dict[str, Any], task: dict[str, Any], message: str, owner: str) -> tuple[Any, Any]:
    """The chat's flow validated and placed, and its input: the task's rows, each with the message as its query
    and the chat before it as its ``messages``."""
    import pyarrow as pa

    prepared = svc.current().prepare({"flow": chat_spec(chat["model"], chat["column"]), "query": message}, owner)
    qid = prepared.queries[0]["qid"]
    earlier = conversation_before(chat.get("messages") or [])
    rows = [{**row, "qid": qid, "query": message, "messages": earlier} for row in task["result"]["data"]]
    table = pa.Table.from_pylist(rows) if rows else pa.table({"qid": pa.array([], pa.string()),
                                                               "query": pa.array([], pa.string())})
    return prepared, table


def conversation_before(messages: list[dict[str, Any]]) -> str:
    """A chat's kept messages as the ``messages`` JSON a follow-up is asked with, without the replies that carry no
    answer (``answered: false``: "No answer could be written (...)"), which a follow-up's search would take words
    from."""
    return json.dumps([{"role": m.get("role"), "content": m.get("content") or m.get("answer") or ""}
                       for m in messages if m.get("answered", True)])


def chat_gone() -> ApiError:
    """The 404 of a chat deleted with its task (``DELETE /task/{id}``, retention) while a message to it was answered."""
    return ApiError(404, "Chat id not found: it was deleted with its task while this message was answered",
                    param="chat_id", code="chat_not_found")


def reply_of(done: dict[str, Any]) -> dict[str, Any]:
    """A chat's reply from the flow's answer (``chat_flows.run_flow``): the answer, the docnos it cites, why it
    is degraded, and how a follow-up was asked."""
    message = done["message"]
    reply = {"answer": done["answer"], "sources": [source["docno"] for source in message["sources"]],
             "degraded": message.get("degraded")}
    if not done.get("answered", True):  # kept, and left out of what a follow-up is asked with
        reply["answered"] = False
    if message.get("standalone_query"):  # a follow-up, asked with the chat before it
        reply["standalone_query"] = message["standalone_query"]
    return reply


@router.get("/task/chat/{chat_id}", summary="Ask a chat: the model's answer grounded in the task's results")
async def chat_message(chat_id: str, request: Request,
                       message: str = Query(..., min_length=1, description="The question."),
                       stream: bool = Query(False, description="Answer as server-sent events: {text} pieces as the "
                                            "model writes the answer, then the reply, then [DONE].")) -> Any:
    return await _ask(chat_id, request, message, stream)


class ChatMessage(BaseModel):
    """``POST /task/chat/{chat_id}``: the GET's query parameters as a JSON body, where a long question fits (9,000
    CJK characters are 81,000 bytes of URL, which the HTTP server refused before the app saw them)."""

    model_config = ConfigDict(extra="forbid")

    message: str = Field(min_length=1, description="The question.")
    stream: bool = Field(False, strict=True, description="Answer as server-sent events, as the GET's stream=true.")


@router.post("/task/chat/{chat_id}", summary="Ask a chat, the question in a JSON body (as GET, for a long one)")
async def chat_message_posted(chat_id: str, request: Request, body: ChatMessage) -> Any:
    return await _ask(chat_id, request, body.message, body.stream)


async def _ask(chat_id: str, request: Request, message: str, stream: bool) -> Any:
    service, owner = svc.current(), tenant(request)
    chat = await asyncio.to_thread(service.store.chat, chat_id, owner)
    if chat is None:
        raise ApiError(404, "Chat id not found", param="chat_id", code="chat_not_found")
    try:
        task = await asyncio.to_thread(service.task, chat["task_id"], owner)
    except ApiError as err:  # the task was deleted since the chat was read: the chat went with it
        raise chat_gone() if err.status == 404 else err from None
    try:
        prepared, table = await asyncio.to_thread(prepare_chat, chat, task, message, owner)
    except ApiError as err:  # the message is the flow's query: an empty or too long one is named as it was sent
        if err.param == "query":
            err.param, err.message = "message", f"message: {err.message.replace('the query', 'the message')}"
        raise

    async def keep(reply: dict[str, Any]) -> dict[str, Any]:
        turn = [{"role": "user", "content": message}, {"role": "assistant", **reply}]
        try:
            kept = await asyncio.to_thread(service.store.add_messages, chat_id, turn,
                                           after=len(chat.get("messages") or []))
        except ChatMoved:  # kept, the answer would follow turns it never saw, as if it had
            raise ApiError(409, "another message of this chat was answered while this one was, so this answer did "
                           "not know that turn and is not kept: send one message at a time, this one again",
                           param="chat_id", code="chat_busy") from None
        except Exception as err:  # a full disk: a 507 saying so, also a streamed answer's last event (not a cut stream)
            if (full := errors.insufficient_storage(f"{request.method} {request.url.path}", err)) is None:
                raise
            raise full from None
        if not kept:
            raise chat_gone()  # deleted with its task while the answer was written: nowhere to keep it
        return {"chat_id": chat_id, **reply}

    if not stream:
        done = await client_gone.answered(service.answers,
                                          lambda cancel: chat_flows.run_flow(prepared, table, cancel=cancel))
        return await keep(reply_of(done))

    async def events() -> AsyncIterator[str]:
        try:
            async for item in chat_flows.answer_events(prepared, table):
                yield f"data: {json.dumps({'text': item} if isinstance(item, str) else await keep(reply_of(item)))}\n\n"
        except ApiError as err:  # headers are sent: the error travels as an event
            yield errors.error_event(err)
            return
        yield "data: [DONE]\n\n"

    return service.answers.stream(events())
