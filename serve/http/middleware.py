"""The API's pure ASGI middlewares' common parts: HTTP scopes only, whether a response has started, and Serve's
cancel of a request read as the client's disconnect."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HttpMiddleware:
    """Base of the API's pure ASGI middlewares: other scopes (lifespan) pass through, ``handle`` gets HTTP."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        raise NotImplementedError


class StartTracker:
    """``send``, noting whether the response has started (after that, no error body can be sent)."""

    def __init__(self, send: Send) -> None:
        self.send, self.started = send, False

    async def __call__(self, message: Message) -> None:
        self.started = self.started or message["type"] == "http.response.start"
        await self.send(message)


def disconnect_when_cancelled(receive: Receive) -> Receive:
    """``receive``, whose cancel by Serve (the client went away: Serve's ``receive`` raises ``TaskCancelledError``)
    is the ``http.disconnect`` that ASGI says it is. Raised, it ended a streamed response's handler with an
    exception that Serve's replica never retrieves: a traceback in the replica's log for every client that left a
    stream (Serve's issue 52477)."""

    async def received() -> Message:
        try:
            return await receive()
        except Exception as err:  # noqa: BLE001  (only Serve's cancel becomes a disconnect; the rest is raised)
            from ray.exceptions import TaskCancelledError  # here: the API also runs without Ray (uvicorn, tests)

            if isinstance(err, TaskCancelledError):
                return {"type": "http.disconnect"}
            raise

    return received
