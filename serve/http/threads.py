"""The ingress's worker threads: answers have a pool of their own, so a search never waits behind chats.

An async route runs its blocking work (a flow, the task store, an index) in a worker thread, so that the event loop
keeps answering. That work is of two kinds, on separate pools:

* short work, on the event loop's default pool (``asyncio.to_thread``, min(32, CPUs + 4) threads): a search (one
  that calls no language model), preparing a flow, the task store's reads and writes, listing flows. Each ends
  within a moment, so a few threads serve many requests.
* answers, on ``Answers.pool`` (``answer_threads`` threads): a flow that writes an answer (a chat of
  ``/v1/chat/completions``, ``/v2/chat`` or ``/task/chat/{id}``, streamed or not) holds its thread until the model
  has written the whole answer, seconds to minutes. On the default pool, eight streamed chats on a 2-core replica
  held its six threads and a bm25 search waited 7.6 s for one. A ``/v1/search`` whose flow calls a language model
  (``calls_model``: ``rag``'s ``generate.answer``) is such a flow too; its preparation stays on the default pool.
  A task's flow (``/task/run``, ``/task/enqueue``) runs on a Ray worker: the ingress only polls the task store.

When every answer thread is taken, up to ``answer_queue`` more answers wait for one; a chat (or such a search)
beyond those is refused before it starts: a 503 ``too_many_answers`` with ``Retry-After``. The health checks have
threads of their own too (serve/health.py). A chat with a served language model (no flow) takes no thread: it awaits
its deployment.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, AsyncIterator, Callable, TypeVar

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from serve.http.errors import ApiError
from serve.http.event_stream import EventStream

T = TypeVar("T")

#: The ``Retry-After`` of a chat refused because every answer thread is taken and the queue is full, in seconds.
RETRY_AFTER_S = 5


async def in_pool(pool: Executor | None, work: Callable[..., T], *args: Any) -> T:
    """``work(*args)`` on ``pool`` (None: the loop's default pool) with this request's context (its request id in
    the log), as ``asyncio.to_thread`` runs it on the default pool."""
    call = functools.partial(contextvars.copy_context().run, work, *args)
    return await asyncio.get_running_loop().run_in_executor(pool, call)


def calls_model(flow: Any) -> bool:
    """Whether a built ``flow`` waits on a language model: one of the steps it runs, or an operator one runs inside
    itself, asks one (``Operator.calls_model``). Such a flow runs on the answers' threads, a search's too."""
    return any(op.calls_model() for step in flow.needed_steps() for _, op in flow.operators[step].walk())


class Answers:
    """The answers' threads (``threads`` at once) and who may wait for one (``queue`` more)."""

    def __init__(self, threads: int, queue: int) -> None:
        self.threads, self.queue = threads, queue
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="tessera-answer")
        self._slots = threading.BoundedSemaphore(threads + queue)  # released from any task or thread

    def admit(self) -> Callable[[], None]:
        """Take an answer's slot, or the 503 when every thread is taken and ``queue`` answers wait already; the
        function that gives the slot back, to call once."""
        if not self._slots.acquire(blocking=False):
            raise ApiError(503, f"too many answers at once: all {self.threads} answer threads are writing answers "
                           f"and {self.queue} more wait for one (answer_threads, answer_queue); retry in "
                           f"{RETRY_AFTER_S} s", kind="server_error", code="too_many_answers",
                           headers={"Retry-After": str(RETRY_AFTER_S)})
        return self._slots.release

    def stream(self, events: AsyncIterator[str]) -> StreamingResponse:
        """A streamed answer's server-sent ``events``, admitted now: its slot is held until the response ends."""
        return _HeldStream(events, self.admit())


class _HeldStream(EventStream):
    """A stream that gives its slot back when it ends, however it ends (read to the end, the client gone, or never
    started: a body that is never iterated runs no ``finally`` of its own)."""

    def __init__(self, events: AsyncIterator[str], release: Callable[[], None]) -> None:
        super().__init__(events)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()
