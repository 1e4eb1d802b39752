"""mosaicRAG's task API, field for field: ``/task/run``, ``/task/enqueue``, ``/task/progress/{id}``,
``/task/cancel/{id}``, ``/pipeline/info``; plus ``GET /tasks``, the caller's own tasks, and ``DELETE /task/{id}``,
one of them deleted once it has ended.

Bodies are a mosaicRAG request (``query``, ``parameters``, steps ``"1"``, ``"2"``... with
``id`` and ``parameters``) or Tessera's native one (``flow``, ``query``/``queries``,
``index``). A task runs on Ray (``serve.taskrunner``); its state lives in the task store.
"""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Body, Request
from fastapi.responses import PlainTextResponse

from serve import service as svc
from serve.auth import LOCAL_TENANT
from serve.errors import ApiError
from serve.results import progress_body
from serve.taskstore import FINAL

router = APIRouter(tags=["tasks"])

#: How often ``/task/run`` looks at its task while waiting: first every 20 ms (a small task on a spare worker
#: ends within 0.3 s), then less often, up to every 0.2 s.
RUN_POLL_FIRST_S, RUN_POLL_S = 0.02, 0.2

TASK_BODY = Body(..., description="A mosaicRAG request or Tessera's native body (see docs/serving.md).",
                 openapi_examples={
                     "native": {"summary": "Tessera", "value": {"flow": "hybrid", "query": "honey bees"}},
                     "mosaic": {"summary": "mosaicRAG", "value": {
                         "query": "honey bees", "1": {"id": "bm25", "parameters": {"k": "20"}},
                         "2": {"id": "reduction", "parameters": {"k": "5"}}}},
                 })


def tenant(request: Request) -> str:
    return getattr(request.state, "tenant", LOCAL_TENANT)


@router.post("/task/run", summary="Run a flow and wait: the progress object with has_finished true")
async def run(request: Request, body: Any = TASK_BODY) -> dict[str, Any]:
    service, owner = svc.current(), tenant(request)
    task_id, delay = await service.enqueue(body, owner), RUN_POLL_FIRST_S
    while True:
        task = await asyncio.to_thread(service.task, task_id, owner)
        if task["status"] in FINAL:
            break
        await asyncio.sleep(delay)
        delay = min(2 * delay, RUN_POLL_S)
    if task["status"] == "failed" and (task["error"] or "").startswith("max_result_rows"):
        raise ApiError(413, task["error"], code="max_result_rows")
    return progress_body(task)


@router.post("/task/enqueue", response_class=PlainTextResponse, summary="Start a flow on Ray; the task id")
async def enqueue(request: Request, body: Any = TASK_BODY) -> str:
    return await svc.current().enqueue(body, tenant(request))


@router.get("/task/progress/{task_id}", summary="A task's progress, and its result once finished")
def progress(task_id: str, request: Request) -> dict[str, Any]:
    return progress_body(svc.current().task(task_id, tenant(request)))


@router.get("/task/cancel/{task_id}", response_class=PlainTextResponse,
            summary="Cancel a task: its Ray work stops, nothing more is written for it")
def cancel(task_id: str, request: Request) -> str:
    svc.current().cancel(task_id, tenant(request))
    return "Success"


@router.delete("/task/{task_id}", summary="Delete an ended task of the caller, with its result and chats")
def delete(task_id: str, request: Request) -> dict[str, Any]:
    """Ended tasks also go by themselves after ``task_retention_days`` (docs/serving.md)."""
    svc.current().delete(task_id, tenant(request))
    return {"task_id": task_id, "deleted": True}


@router.get("/tasks", summary="The caller's tasks and how many are in each state")
def list_tasks(request: Request) -> dict[str, Any]:
    store = svc.current().store
    owner = tenant(request)
    return {"tasks": store.list_tasks(owner), "counts": store.status_counts(owner)}


@router.get("/pipeline/info", summary="mosaicRAG's pipeline info: every operator and its parameters")
def pipeline_info() -> dict[str, Any]:
    from flows.info import mosaic_info

    return mosaic_info()
