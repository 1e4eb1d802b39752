"""Flows run for one HTTP request stop when its client goes away.

Ray Serve cancels a request's handler when the client disconnects (its proxy watches for
``http.disconnect``). A flow running in a worker thread would not notice: it would run to the
end, holding a thread, the models and the language model's replica for an answer nobody reads.
``in_thread`` gives the work a ``CancelToken`` and cancels it with the handler, so the flow stops
at its next batch and the embedded model at its next token. An answer's flow runs on the answers' own threads
(``pool``: serve/http/threads.py), a search's on the loop's default pool.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from typing import Callable, TypeVar

from flows.progress import CancelToken
from operators.errors import FlowCancelled
from serve.http.errors import ApiError
from serve.http.threads import Answers, in_pool

T = TypeVar("T")

GONE = "the client went away"


async def in_thread(work: Callable[[CancelToken], T], pool: Executor | None = None) -> T:
    """``work(cancel)`` in a thread of ``pool`` (None: the loop's default pool); if this request is cancelled
    meanwhile, ``cancel`` is set too."""
    cancel = CancelToken()
    try:
        return await in_pool(pool, work, cancel)
    except asyncio.CancelledError:
        cancel.cancel(GONE)
        raise
    except FlowCancelled as err:  # Serve cancelled the work's model call as the client left, before this handler
        raise stopped(err) from None


def stopped(err: FlowCancelled) -> ApiError:
    """What a request whose flow was cancelled while it ran answers: under Serve, the client left (Serve cancels the
    request's model calls; the handler's own cancel comes after), so nobody reads it; never a 500 and a traceback."""
    return ApiError(499, f"the answer stopped: {err}", kind="server_error", code="cancelled")


async def answered(answers: Answers, work: Callable[[CancelToken], T]) -> T:
    """An unstreamed answer: ``work(cancel)`` as ``in_thread`` runs it, on the answers' threads, admitted now (the
    503 when they and their queue are taken) and its slot held while it is written."""
    release = answers.admit()
    try:
        return await in_thread(work, answers.pool)
    finally:
        release()
