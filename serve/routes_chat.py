"""Chats about a task's results (mosaicRAG's ``/task/chat/new`` and ``/task/chat/{id}``).

A chat belongs to one finished task of the caller and names a language ``model`` and the
result ``column`` to ground on. Each message runs the answer path of the ``rag`` flow
(``query.contextualize`` with the chat's earlier messages, so a follow-up stands alone, then
``generate.context`` and ``generate.answer``, issue #31's LLM gateway) through the engine over
that task's result rows, with the answer written on the app's language-model deployment when it
runs the chat's model (as the service places every flow's steps); the exchange is kept in the
task store. Unlike
the seed, an unknown chat id is a 404.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import PlainTextResponse

from serve import client_gone
from serve import service as svc
from serve.errors import ApiError
from serve.routes_tasks import tenant

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
    service, owner = svc.current(), tenant(request)
    task = service.task(task_id, owner)
    if task["status"] != "finished":
        raise ApiError(409, f"task {task_id} is {task['status']}; a chat needs a finished task", param="task_id",
                       code="task_not_finished")
    rows = task["result"]["data"]
    if rows and column not in rows[0]:
        raise ApiError(422, f"the task's results have no column '{column}' (columns: {', '.join(rows[0])})",
                       param="column")
    return service.store.create_chat(owner, task_id, model, column)


def answer(chat: dict[str, Any], task: dict[str, Any], message: str, cancel: Any = None) -> dict[str, Any]:
    import pyarrow as pa

    from flows.executors import make_executor
    from flows.spec import FlowSpec

    earlier = json.dumps([{"role": m.get("role"), "content": m.get("content") or m.get("answer") or ""}
                          for m in chat.get("messages") or []])
    rows = [{**row, "qid": "chat", "query": message, "messages": earlier} for row in task["result"]["data"]]
    table = pa.Table.from_pylist(rows) if rows else pa.table({"qid": pa.array([], pa.string()),
                                                               "query": pa.array([], pa.string())})
    spec = svc.current().place(FlowSpec.parse(chat_spec(chat["model"], chat["column"])))
    result = make_executor("local", keep_history=False).run(spec, table, cancel=cancel)
    meta = result.metadata.get("chat", {})
    reply = {"answer": meta.get("answer", ""), "sources": meta.get("sources", []), "degraded": meta.get("degraded")}
    if meta.get("standalone_query"):  # a follow-up, asked with the chat before it
        reply["standalone_query"] = meta["standalone_query"]
    return reply


@router.get("/task/chat/{chat_id}", summary="Ask a chat: the model's answer grounded in the task's results")
async def chat_message(chat_id: str, request: Request,
                       message: str = Query(..., min_length=1, description="The question.")) -> dict[str, Any]:
    service, owner = svc.current(), tenant(request)
    chat = await asyncio.to_thread(service.store.chat, chat_id, owner)
    if chat is None:
        raise ApiError(404, "Chat id not found", param="chat_id", code="chat_not_found")
    task = await asyncio.to_thread(service.task, chat["task_id"], owner)
    reply = await client_gone.in_thread(lambda cancel: answer(chat, task, message, cancel))
    await asyncio.to_thread(service.store.add_messages, chat_id, [{"role": "user", "content": message},
                                                                  {"role": "assistant", **reply}])
    return {"chat_id": chat_id, **reply}
