"""The ingress's drain: while the service shuts down, what is in flight finishes and nothing new starts.

``tessera serve``'s runner (``flows/commands/serve_drain.py``) calls ``ModelAPI.drain`` on every ingress replica
when it gets SIGTERM or SIGINT, and calls it again until each answers that no request is in flight (or its grace
period is over); only then does Serve shut down, which closes its proxies' connections. ``DrainGuard``, the app's
outermost middleware, counts the requests in flight (a streamed answer until its last byte) and, once draining,
answers every new request, ``/healthz`` too, with a 503 ``shutting_down`` and ``Retry-After``: a load balancer that
polls ``/healthz`` stops sending here, and a client retries elsewhere. One replica is one process, so the state is
the module's.
"""

from __future__ import annotations

import threading

from starlette.types import Receive, Scope, Send

from serve.http.errors import error_response
from serve.http.middleware import HttpMiddleware

#: The ``Retry-After`` of a request refused while draining: another instance (behind the same address) answers it.
SHUTTING_DOWN_RETRY_AFTER_S = 5


class _State:
    """Requests in flight in this replica's app, and whether it drains. A lock, as ``drain`` and the requests run
    on the replica's event loop, but a test may serve the app from another thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.in_flight = 0
        self.draining = False


STATE = _State()


def drain() -> int:
    """Refuse new requests from now on; the number still in flight (the runner waits for 0)."""
    with STATE.lock:
        STATE.draining = True
        return STATE.in_flight


def in_flight() -> int:
    with STATE.lock:
        return STATE.in_flight


def reset() -> None:
    """Serve requests again (a test's app, which outlives one test)."""
    with STATE.lock:
        STATE.draining = False


class DrainGuard(HttpMiddleware):
    """Counts each HTTP request until its response has ended; while draining, refuses a new one with a 503."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        with STATE.lock:
            refused = STATE.draining
            if not refused:
                STATE.in_flight += 1
        if refused:
            response = error_response(503, "the server is shutting down: it finishes the requests it has and takes "
                                      f"no new ones; retry in {SHUTTING_DOWN_RETRY_AFTER_S} s (another instance "
                                      "answers)", kind="server_error", code="shutting_down")
            response.headers["Retry-After"] = str(SHUTTING_DOWN_RETRY_AFTER_S)
            response.headers["Connection"] = "close"  # a kept-alive client reconnects, to another instance
            await response(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            with STATE.lock:
                STATE.in_flight -= 1
