"""``POST /v1/search``: the online path. One request runs its flow in this replica with the local executor
(in a worker thread, so the event loop keeps answering), with model steps placed on the app's deployments.

Body: ``flow`` (name or inline spec, default ``hybrid``), ``query`` or ``queries``, ``top_k``,
optional ``index``. Answer: per query, its hits best first and its metadata.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from fastapi import APIRouter, Body, Request

from serve.http import client_gone
from serve import service as svc
from serve.runs.online import run_online
from serve.tasks.results import search_hits
from serve.routes.tasks import tenant
from serve.http.threads import calls_model

router = APIRouter(tags=["search"])


def searched(prepared: svc.Prepared, cancel: Any = None) -> dict[str, Any]:
    """The answer to a search: its flow run here, per query its hits and metadata."""
    started = time.perf_counter()
    result = run_online(prepared, cancel=cancel)
    return {"object": "search", "flow": prepared.spec.name, "took_ms": round(1000 * (time.perf_counter() - started), 2),
            "results": search_hits(result, prepared.queries)}


@router.post("/v1/search", summary="Search with a flow: the top_k hits of each query")
async def search(request: Request, body: dict[str, Any] = Body(
        ..., examples=[{"flow": "hybrid", "query": "honey bees", "top_k": 5}])) -> dict[str, Any]:
    """A flow that calls a language model (``rag``'s answer) runs on the answers' threads, admitted as a chat is (a
    503 ``too_many_answers`` when they and their queue are taken): on the default pool, a few such searches held
    its every thread while their model wrote, and a bm25 search waited behind them (serve/http/threads.py)."""
    service = svc.current()
    prepared = await asyncio.to_thread(service.prepare, body, tenant(request), search=True)
    if not calls_model(prepared.flow):
        return await client_gone.in_thread(lambda cancel: searched(prepared, cancel))
    return await client_gone.answered(service.answers, lambda cancel: searched(prepared, cancel))
