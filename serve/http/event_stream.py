"""A streamed answer's response: server-sent events, with the headers that keep a proxy in front from holding them.

nginx, as most operators put it in front of the service, buffers a proxied response by default: a chat's events
reached the client all at once when the model had written its last word. ``X-Accel-Buffering: no`` turns that off
for the one response (nginx reads it; other proxies ignore it), and ``Cache-Control: no-cache`` keeps any cache
between from storing or holding an answer that is the user's own (docs/serving.md, "Behind a reverse proxy")."""

from __future__ import annotations

from typing import AsyncIterator

from fastapi.responses import StreamingResponse

#: Sent with every stream of events.
UNBUFFERED = {"X-Accel-Buffering": "no", "Cache-Control": "no-cache"}


class EventStream(StreamingResponse):
    """``events`` (``data: ...`` lines) as ``text/event-stream``, not to be buffered or cached on the way."""

    def __init__(self, events: AsyncIterator[str]) -> None:
        super().__init__(events, media_type="text/event-stream", headers=UNBUFFERED)
