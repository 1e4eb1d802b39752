"""A deployment's answer on its way to the client: its first event awaited (``opened``: a failure before the answer
starts is still a 400 or 500), then returned whole (``whole_answer``) or as server-sent events (``sse``), and a failed
answer in the caller's words (``model_failure``). A module of its own so that serve/chat/chat.py keeps the request (its
body, where it goes, what the deployment gets); Cohere's /v2/chat reads the same events. serve/chat/chat.py imports
these names, so ``serve.chat.chat.opened``, ``.sse``, ... hold.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncIterator

from serve.http import errors
from serve.http.errors import ApiError
from serve.schemas import ModelCard


class Opened:
    """A deployment's event stream whose first event has arrived (``opened``); iterated, that event comes first.
    ``cancel`` cancels the stream on the deployment, as the stream's own does."""

    def __init__(self, first: list[Any], events: Any) -> None:
        self.first, self.events = first, events

    async def __aiter__(self) -> AsyncIterator[Any]:
        for event in self.first:
            yield event
        async for event in self.events:
            yield event

    def cancel(self) -> None:
        self.events.cancel()


async def opened(events: Any, card: ModelCard) -> Opened:
    """``events`` once its first event is in: a failure before the answer starts (messages longer than the model
    reads) is then raised as its ``ApiError``, a 400 or 500 while the response can still be one, rather than an
    error event after a 200."""
    try:
        first = [await events.__anext__()]
    except StopAsyncIteration:
        first = []
    except asyncio.CancelledError:  # the client went away while the model read the prompt
        events.cancel()
        raise
    except Exception as err:  # noqa: BLE001  (the model's failure: named, details in the log)
        raise model_failure(card, err) from None
    from serve.deployments.llm import TOO_LONG

    if first and isinstance(first[0], dict) and TOO_LONG in first[0]:  # the caller's to shorten, as OpenAI says
        raise ApiError(400, f"model '{card.id}': {first[0][TOO_LONG]}", param="messages",
                       code="context_length_exceeded")
    return Opened(first, events)


async def whole_answer(events: Any, card: ModelCard) -> dict[str, Any]:
    """The unstreamed answer (OpenAI's ``chat.completion``), the stream's one event (``opened``: a failure is
    ``model_failure``'s 400 or 500 naming the model)."""
    got = await opened(events, card)
    if not got.first:
        raise errors.server_error(f"model '{card.id}'", RuntimeError("no answer"), code="model_error")
    return _plain(got.first[0])


async def sse(events: Any, card: ModelCard) -> AsyncIterator[str]:
    """The engine's events as SSE text; a failure mid-stream ends it with an OpenAI error event. A stream left
    before its end (the client went away) is cancelled on the deployment, which stops generating."""
    ended = False
    try:
        async for event in events:
            for item in event if isinstance(event, list) else [event]:
                yield item if isinstance(item, str) else f"data: {json.dumps(_plain(item))}\n\n"
        ended = True
    except Exception as err:  # noqa: BLE001  (headers are sent: the error travels as an event)
        ended = True
        yield errors.error_event(model_failure(card, err))
    finally:
        if not ended:
            events.cancel()


def model_failure(card: ModelCard, err: BaseException) -> ApiError:
    """What a failed answer is to the caller: a lost replica a 503 with Retry-After; anything else a 500 naming the
    model. (Messages longer than the model reads are no failure: ``opened`` answers them.)"""
    what = f"model '{card.id}' (deployment '{card.deployment}')"
    return errors.unavailable(what, err) or errors.server_error(what, err, code="model_error")


def _plain(item: Any) -> Any:
    return item.model_dump() if hasattr(item, "model_dump") else item
