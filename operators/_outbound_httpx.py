"""The guarded httpx clients behind ``operators.outbound``: the checks of ``_outbound_requests``, on httpcore.

The transport's network backend resolves, checks and connects to a checked address; a request hook checks each
URL (redirect hops too). Passing our transport also turns off httpx's environment proxies, which would bypass it.
"""

from __future__ import annotations

import socket
from typing import Any

import httpcore
import httpx

from operators._outbound_policy import OutboundPolicy, OutboundURLError, check_url, checked_addresses

_TRANSPORT_ARGS = ("verify", "cert", "http1", "http2", "limits", "retries", "local_address", "socket_options")


def _addresses(host: str, port: int, policy: OutboundPolicy) -> list[str]:
    try:
        return checked_addresses(host, port, policy)
    except socket.gaierror as err:
        raise httpcore.ConnectError(f"cannot resolve {host}: {err}") from err


class _GuardedBackend(httpcore.NetworkBackend):
    def __init__(self, policy: OutboundPolicy) -> None:
        self._policy, self._inner = policy, httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        last_error: Exception | None = None
        for address in _addresses(host, port, self._policy):
            try:
                return self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as err:
                last_error = err
        raise last_error  # type: ignore[misc]

    def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None) -> Any:
        raise OutboundURLError("a guarded client does not connect to unix sockets")

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _AsyncGuardedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, policy: OutboundPolicy) -> None:
        self._policy, self._inner = policy, httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None, socket_options: Any = None) -> Any:
        import anyio.to_thread

        last_error: Exception | None = None
        for address in await anyio.to_thread.run_sync(_addresses, host, port, self._policy):
            try:
                return await self._inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as err:
                last_error = err
        raise last_error  # type: ignore[misc]

    async def connect_unix_socket(self, path: str, timeout: float | None = None, socket_options: Any = None
                                  ) -> Any:
        raise OutboundURLError("a guarded client does not connect to unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def httpx_client(policy: OutboundPolicy | None, *, asynchronous: bool, **client_kwargs: Any) -> Any:
    """An httpx client (``asynchronous``: an AsyncClient) on a guarded transport."""
    policy = OutboundPolicy.from_env() if policy is None else policy
    transport_kwargs = {name: client_kwargs.pop(name) for name in _TRANSPORT_ARGS if name in client_kwargs}
    if asynchronous:
        transport: Any = httpx.AsyncHTTPTransport(**transport_kwargs)
        transport._pool._network_backend = _AsyncGuardedBackend(policy)

        async def check_async(request: httpx.Request) -> None:
            check_url(str(request.url), policy=policy, resolve=False)

        return httpx.AsyncClient(transport=transport, event_hooks={"request": [check_async]}, **client_kwargs)
    transport = httpx.HTTPTransport(**transport_kwargs)
    transport._pool._network_backend = _GuardedBackend(policy)

    def check(request: httpx.Request) -> None:
        check_url(str(request.url), policy=policy, resolve=False)

    return httpx.Client(transport=transport, event_hooks={"request": [check]}, **client_kwargs)
