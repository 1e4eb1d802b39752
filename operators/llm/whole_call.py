"""A model call's limit in all (``total_timeout``), past which it is abandoned, its connection closed.

litellm's ``timeout`` bounds each wait for the server's next bytes, so a server that writes a word every few
seconds, or keep-alive bytes, held a call (a step, a chat's answer) for as long as it went on. httpx has no limit for
a whole request, and a blocked read of a sync call cannot be stopped from outside. So a call to a server runs as
litellm's async call (the Router's ``acompletion``: its retries and their backoff are litellm's, as before) on one
event loop per process, and the caller waits for it (checking its flow's cancel while a reply streams): past the
limit the task is cancelled, which closes its HTTP connection and ends litellm's retries with it (a cancel is never
retried), so no thread or request is left behind. A streamed reply comes back to the caller's thread chunk by chunk.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from concurrent.futures import Future
from typing import Any, Awaitable, Callable, Iterator

from operators.interrupt import checkpoint

#: How often a waiting caller looks at its flow's cancel and the clock (seconds).
POLL_S = 0.05
#: Past how many timeouts a call is abandoned when neither the call nor its alias sets ``total_timeout``: each attempt
#: (``num_retries`` + 1) may take its timeout, and one more timeout (litellm's backoffs are counted apart).
TOTAL_TIMEOUTS_PAST_ATTEMPTS = 1
#: Seconds past its timeout an attempt may take (its connection, litellm's own work, on a busy machine).
ATTEMPT_SLACK_S = 1.0


class CallOverran(Exception):
    """The call went on past its ``total_timeout``; it was abandoned."""


def default_limit(timeout: float, retries: int) -> float:
    """A call's ``total_timeout`` when none is set: a timeout and ``ATTEMPT_SLACK_S`` for each attempt, one more
    timeout, and litellm's longest backoffs (248.75 s for 60 s and 2 retries). With the timeouts alone, a server that
    refused, answered 503 or sent nothing past a timeout of a few seconds was abandoned in litellm's backoffs, "the
    server kept it going", not the failure it was."""
    return (timeout + ATTEMPT_SLACK_S) * (retries + 1) + timeout * TOTAL_TIMEOUTS_PAST_ATTEMPTS + _backoffs(retries)


def _backoffs(retries: int) -> float:
    """The longest litellm's Router sleeps between a call's attempts, and after its last one (it does, when it
    retries at all): its exponential backoff and jitter (``litellm.utils.calculate_retry_after``; a server's
    ``Retry-After`` of up to 60 s is waited out instead)."""
    from litellm.constants import INITIAL_RETRY_DELAY, JITTER, MAX_RETRY_DELAY

    if not retries:
        return 0.0
    return sum(min(INITIAL_RETRY_DELAY * 2 ** i, MAX_RETRY_DELAY) + JITTER for i in range(retries + 1))


_loop: tuple[int, asyncio.AbstractEventLoop, threading.Thread] | None = None
_lock = threading.Lock()


def _running_loop() -> asyncio.AbstractEventLoop:
    """This process's loop for model calls, started on first use (again in a forked child, whose copy has no
    thread running it)."""
    global _loop
    with _lock:
        if _loop is None or _loop[0] != os.getpid() or not _loop[2].is_alive():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="tessera-llm-io", daemon=True)
            thread.start()
            _loop = (os.getpid(), loop, thread)
        return _loop[1]


_warmed: set[int] = set()


def warm() -> None:
    """Import what litellm's first async call imports (its async logging, OpenTelemetry's SDK: seconds on a busy
    machine, which a first call's ``total_timeout`` of a few seconds was spent on) by a call that sends nothing
    (litellm's ``mock_response``), once per process; ``operators.llm.gateway`` runs it as it builds a Router, on the
    thread that a cancel does not wait for."""
    if os.getpid() in _warmed:
        return
    from litellm import Router

    router = Router(model_list=[{"model_name": "m", "litellm_params": {"model": "openai/warm", "api_key": "none"}}])
    call = router.acompletion(model="m", messages=[{"role": "user", "content": "hi"}], mock_response="ok")
    asyncio.run_coroutine_threadsafe(call, _running_loop()).result()  # (on the calls' loop: litellm's logging
    # worker keeps to the first loop it meets, and said "event loop changed" when it met another)
    _warmed.add(os.getpid())


def result_within(call: Callable[[], Awaitable[Any]], deadline: float) -> Any:
    """What ``await call()`` returns, run on the loop; ``CallOverran`` once ``time.monotonic()`` passes
    ``deadline`` (``FlowCancelled`` on a cancel): the call is cancelled, its connection closed."""
    for kind, item in _items(call, None, deadline):
        if kind == "done":
            return item
    raise AssertionError("unreachable")  # (_items ends with "done" or raises)


def stream_within(open_stream: Callable[[], Awaitable[Any]], deadline: float) -> Iterator[Any]:
    """The stream ``await open_stream()`` gives, then each of its chunks, in the caller's thread; ``CallOverran``
    as ``result_within``. Leaving early (a raise, a reply too long) cancels it too."""
    for kind, item in _items(open_stream, True, deadline):
        if kind != "done":
            yield item


async def _nothing() -> None:
    return None


def _items(call: Callable[[], Awaitable[Any]], stream: bool | None,
           deadline: float) -> Iterator[tuple[str, Any]]:
    """("stream", the stream), ("chunk", each chunk) when ``stream``, and ("done", the result) last."""
    items: queue.Queue = queue.Queue()

    async def run() -> Any:
        result = await call()
        if stream:
            items.put(("stream", result))
            try:
                async for chunk in result:
                    items.put(("chunk", chunk))
            finally:  # (cancelled too: litellm shields its close, which releases the connection)
                await getattr(result, "aclose", _nothing)()
        return result

    future: Future = asyncio.run_coroutine_threadsafe(run(), _running_loop())
    future.add_done_callback(lambda done: items.put(("end", done)))
    try:
        while True:
            try:
                kind, item = items.get(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
            except queue.Empty:
                if stream:  # a cancel stops a stream between chunks; a reply being written is let finish (in its
                    checkpoint()  # deadline), so a rerun after a Ctrl-C reads it back instead of asking again
                if time.monotonic() >= deadline:
                    raise CallOverran() from None
                continue
            if kind == "end":
                yield "done", item.result()  # (raises the call's error)
                return
            if time.monotonic() >= deadline:  # a word a second, never the end
                raise CallOverran()
            yield kind, item
    finally:
        future.cancel()  # (a finished call: nothing to do; else its task is cancelled on the loop)
