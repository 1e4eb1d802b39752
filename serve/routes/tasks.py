"""mosaicRAG's task API, field for field: ``/task/run``, ``/task/enqueue``, ``/task/progress/{id}``,
``/task/cancel/{id}``, ``/pipeline/info``; plus ``GET /tasks``, the caller's own tasks, and ``DELETE /task/{id}``,
one of them deleted once it has ended. ``GET /tasks`` pages: ended tasks stay ``task_retention_days``, so a key
that runs hundreds an hour keeps hundreds of thousands, too many for one response.

Bodies are a mosaicRAG request (``query``, ``parameters``, steps ``"1"``, ``"2"``... with
``id`` and ``parameters``) or Tessera's native one (``flow``, ``query``/``queries``,
``index``). A task runs on Ray (``serve.tasks.taskrunner``); its state lives in the task store.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import math
from typing import Any, Literal

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import PlainTextResponse

from operators.errors import see_docs
from operators.unicode import unicode_problem
from serve import service as svc
from serve.security.auth import LOCAL_TENANT
from serve.http.errors import ApiError
from serve.tasks import unstored
from serve.tasks.results import progress_body
from serve.tasks.taskstore import FINAL, UNFINISHED

router = APIRouter(tags=["tasks"])

#: How often ``/task/run`` looks at its task while waiting: first every 20 ms (a small task on a spare worker
#: ends within 0.3 s), then less often, up to every 0.2 s.
RUN_POLL_FIRST_S, RUN_POLL_S = 0.02, 0.2

TASK_BODY = Body(..., description=f"A mosaicRAG request or Tessera's native body: see {see_docs('serving')}.",
                 openapi_examples={
                     "native": {"summary": "Tessera", "value": {"flow": "hybrid", "query": "honey bees"}},
                     "mosaic": {"summary": "mosaicRAG", "value": {
                         "query": "honey bees", "1": {"id": "bm25", "parameters": {"k": "20"}},
                         "2": {"id": "reduction", "parameters": {"k": "5"}}}},
                 })


def tenant(request: Request) -> str:
    return getattr(request.state, "tenant", LOCAL_TENANT)


@router.post("/task/run", summary="Run a flow and wait: the progress object with has_finished true")
async def run(request: Request, body: dict[str, Any] = TASK_BODY) -> dict[str, Any]:
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
async def enqueue(request: Request, body: dict[str, Any] = TASK_BODY) -> str:
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


#: ``GET /tasks``: the tasks a page has unless ``limit`` says, and the most it may say.
PAGE_DEFAULT, PAGE_MAX = 100, 1000

TaskState = Literal["queued", "running", "finished", "failed", "cancelled"]
assert set(TaskState.__args__) == {*UNFINISHED, *FINAL}


def cursor(task: dict[str, Any]) -> str:
    """The opaque ``before`` of the page after ``task``: its (created, id), so tasks created at the same time page
    too (JSON writes the float exactly, so it compares equal when read back)."""
    return base64.urlsafe_b64encode(json.dumps([task["created"], task["id"]]).encode()).decode().rstrip("=")


def read_cursor(before: str) -> tuple[float, str]:
    """``before`` as ``cursor`` wrote it; a 422 naming ``before`` otherwise. Only what ``cursor`` writes: a finite
    time and an id of text without NUL, since Python's JSON also reads ``NaN`` and ``1e400`` (no task's time), a lone
    surrogate (which no store's text holds: SQLite raised) and a NUL (which PostgreSQL's text refuses)."""
    try:
        created, task_id = json.loads(base64.urlsafe_b64decode(before + "=" * (-len(before) % 4)))
        if isinstance(created, (int, float)) and not isinstance(created, bool) and isinstance(task_id, str):
            created = float(created)
            if math.isfinite(created) and unicode_problem(task_id) is None and "\x00" not in task_id:
                return created, task_id
    except (ValueError, TypeError, OverflowError, binascii.Error):  # not base64, not JSON, not a pair, no float
        pass
    raise ApiError(422, "before: not a cursor of GET /tasks; send the 'next' of the page before, as it came",
                   param="before", code="invalid_cursor")


@router.get("/tasks", summary="The caller's tasks newest first, a page at a time, and how many are in each state")
def list_tasks(request: Request,
               limit: int = Query(PAGE_DEFAULT, ge=1, le=PAGE_MAX, description="tasks in this page"),
               before: str | None = Query(None, description="the previous page's 'next': the tasks after it"),
               status: TaskState | None = Query(None, description="this state's tasks only")) -> dict[str, Any]:
    """``next`` is the ``before`` of the following page, null on the last; ``counts`` is every state's whole count."""
    store = svc.current().store
    owner = tenant(request)
    unstored.store_all(store)  # failures kept while the task store refused them: stored now if it takes them
    failed = unstored.shown_failed(store, owner)  # those it still refuses: failed, marked not stored, filtered so
    page = store.list_tasks(owner, limit=limit + 1, before=None if before is None else read_cursor(before),
                            status=status, shown_failed=failed)
    more = len(page) > limit
    page, counts = page[:limit], store.status_counts(owner)
    unstored.listed(page, counts, failed)
    return {"tasks": page, "next": cursor(page[-1]) if more else None, "counts": counts}


@router.get("/pipeline/info", summary="mosaicRAG's pipeline info: every operator and its parameters")
def pipeline_info() -> dict[str, Any]:
    from flows.info import mosaic_info

    return with_service_models(mosaic_info())


def with_service_models(info: dict[str, Any]) -> dict[str, Any]:
    """``info`` with each language-model param offering this service's aliases, the only models it runs
    (``spec_guard.check_llm``): the operators' own text offered "any litellm model string", which it refuses."""
    from operators.llm.aliases import aliases
    from operators.local_files import marked_params
    from operators.registry import all_operators

    known = sorted(aliases())
    for name, cls in all_operators().items():
        for param in marked_params(cls.Params, "llm_model") if name in info else ():
            info[name]["parameters"][param] = {
                **info[name]["parameters"][param], "supported-values": known, "enforce-limit": True,
                "description": f"A language model alias of this service ({', '.join(known)}): it runs language "
                               "models by alias only (its $TESSERA_MODELS file adds aliases)"}
    return info
