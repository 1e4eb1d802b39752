"""The guarded requests session behind ``operators.outbound`` (``_outbound_httpx`` is the httpx one).

Both check each request's URL before sending (scheme, form, literal addresses: redirect hops included, since
each hop is sent as a new request) and, at the socket, resolve the host once, check every address and connect
to a checked one. The check at the socket is what defeats DNS rebinding and names that resolve inward; the
URL check gives the clear error early. The host name still goes in the Host header, SNI and certificate check.
"""

from __future__ import annotations

import socket
from typing import Any

from requests.adapters import HTTPAdapter
from requests.utils import select_proxy
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, PoolManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError

from operators._outbound_policy import OutboundPolicy, check_url, checked_addresses


# -- requests / urllib3 -------------------------------------------------------------------------------------


class _GuardedConnectionMixin:
    """Connects the socket to an address the policy allows (urllib3 would resolve the name again)."""

    outbound_policy: OutboundPolicy

    def _new_conn(self) -> socket.socket:
        try:
            addresses = checked_addresses(self._dns_host, self.port, self.outbound_policy)
        except socket.gaierror as err:
            raise NameResolutionError(self.host, self, err) from err
        dns_host, last_error = self._dns_host, None
        for address in addresses:
            self._dns_host = address  # only the socket uses _dns_host; Host, SNI and the cert check use the name
            try:
                return super()._new_conn()
            except ConnectTimeoutError as err:  # NewConnectionError too: try the next checked address
                last_error = err
            finally:
                self._dns_host = dns_host
        raise last_error


class _GuardedHTTPConnection(_GuardedConnectionMixin, HTTPConnection):
    pass


class _GuardedHTTPSConnection(_GuardedConnectionMixin, HTTPSConnection):
    pass


class _GuardedPoolMixin:
    outbound_policy: OutboundPolicy

    def _new_conn(self) -> Any:
        conn = super()._new_conn()
        conn.outbound_policy = self.outbound_policy
        return conn


class _GuardedHTTPPool(_GuardedPoolMixin, HTTPConnectionPool):
    ConnectionCls = _GuardedHTTPConnection


class _GuardedHTTPSPool(_GuardedPoolMixin, HTTPSConnectionPool):
    ConnectionCls = _GuardedHTTPSConnection


class _GuardedPoolManager(PoolManager):
    def __init__(self, policy: OutboundPolicy, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.outbound_policy = policy
        self.pool_classes_by_scheme = {"http": _GuardedHTTPPool, "https": _GuardedHTTPSPool}

    def _new_pool(self, scheme: str, host: str, port: int, request_context: Any = None) -> Any:
        pool = super()._new_pool(scheme, host, port, request_context)
        pool.outbound_policy = self.outbound_policy
        return pool


class GuardedAdapter(HTTPAdapter):
    """A requests adapter that sends only to URLs, and connects only to addresses, the policy allows."""

    __attrs__ = [*HTTPAdapter.__attrs__, "outbound_policy"]

    def __init__(self, policy: OutboundPolicy, **kwargs: Any) -> None:
        self.outbound_policy = policy
        super().__init__(**kwargs)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        self.poolmanager = _GuardedPoolManager(self.outbound_policy, num_pools=connections, maxsize=maxsize,
                                               block=block, **pool_kwargs)

    def send(self, request: Any, stream: bool = False, timeout: Any = None, verify: Any = True, cert: Any = None,
             proxies: Any = None) -> Any:
        # Through a proxy the socket goes to the proxy, which resolves the name: check the name's addresses here.
        proxied = select_proxy(request.url, proxies or {}) is not None
        check_url(request.url, policy=self.outbound_policy, resolve=proxied)
        return super().send(request, stream=stream, timeout=timeout, verify=verify, cert=cert, proxies=proxies)


def guard_requests_session(session: Any, policy: OutboundPolicy | None) -> Any:
    policy = OutboundPolicy.from_env() if policy is None else policy
    for prefix in ("http://", "https://"):
        old = session.get_adapter(prefix)
        keep = ({"pool_connections": old._pool_connections, "pool_maxsize": old._pool_maxsize,
                 "pool_block": old._pool_block, "max_retries": old.max_retries}
                if isinstance(old, HTTPAdapter) else {})
        session.mount(prefix, GuardedAdapter(policy, **keep))
    return session
