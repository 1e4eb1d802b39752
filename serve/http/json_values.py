"""Every request the service answers quotes a refused value as JSON writes it: ``(got ["20"])``, ``(got null)``,
not Python's ``['20']`` and ``None``. An API client sends and reads JSON, whatever the route (a flow's params, an
inline spec, a setting of a chat); the CLI, whose user writes YAML, keeps ``short_repr``. A middleware rather than
each route: no route, nor a refusal in FastAPI's handlers, can forget it; its handlers' threads
(``asyncio.to_thread``, Starlette's thread pool) copy the context, so the flag reaches them."""

from __future__ import annotations

from starlette.types import Receive, Scope, Send

from operators.errors import values_as_json
from serve.http.middleware import HttpMiddleware


class JsonValues(HttpMiddleware):
    """Handles each HTTP request within ``operators.error_text.values_as_json``."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        with values_as_json():
            await self.app(scope, receive, send)
