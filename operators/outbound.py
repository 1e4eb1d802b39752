"""One SSRF guard for every URL a flow spec names: rerank.api's ``url``, sources.mosaic's ``url``. (A language
model's ``api_base`` is in the alias files, the server operator's, not in specs: the gateway does not guard it.)

Why: a flow spec can come over HTTP from someone else, and a URL in it must not reach what only the server can
reach: its loopback ports (Ray's dashboard and job API, the Serve app itself), private hosts, the cloud metadata
endpoint. So every outbound URL passes here, and every connection is made to an address this module checked.

What passes: ``http``/``https`` URLs without ``user:password@``, whitespace or backslashes, whose host resolves
only to public addresses. Blocked: loopback, private (RFC 1918, fc00::/7), shared (100.64/10), link-local and the
metadata addresses (169.254.169.254, fd00:ec2::254, 100.100.100.200, metadata.google.internal), multicast,
unspecified (0.0.0.0, ::), reserved and documentation ranges; IPv4 written in decimal, octal or hex
(``2130706433``, ``0177.0.0.1``, ``0x7f.1``) is read as the address the C resolver would connect to; an IPv6
address that embeds an IPv4 one (``::ffff:127.0.0.1``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``) is judged by
the IPv4 address. A name must resolve to allowed addresses only (all of them, since a client may pick any).

Policy (read from the environment when a check or a client is made, so Ray workers inherit it):

- ``TESSERA_OUTBOUND=server`` (the default, what the service runs with): public addresses only.
  ``TESSERA_OUTBOUND=local`` (the ``tessera`` CLI and ``python -m flows.*`` set it unless it is set): loopback is
  allowed too, so a local Ollama, TEI or ``serve run`` works; the user wrote the spec and can reach localhost
  anyway. An SSRF matters where the spec comes from someone else, and that is the service.
- ``TESSERA_ALLOW_HOSTS``: comma-separated exceptions in either mode: host names (exact, e.g.
  ``mosaic.internal``: whatever it resolves to is trusted), addresses and CIDRs (``10.0.0.0/8``, ``::1``), and
  the words ``loopback`` and ``private``. A metadata address is allowed only when named exactly.

Redirects: each hop is a new request through the same guard (the guarded clients check every request and every
connection), so a public URL that redirects to ``http://169.254.169.254/`` fails at that hop. DNS rebinding:
the guarded clients resolve a name once, check every address, and connect the socket to a checked address (TLS
still verifies the name), so a second, different answer cannot be slipped in between check and connect. Through
a proxy from the environment (requests only; the httpx clients ignore those) the proxy resolves the name, so the
guard resolves and checks it before sending, and a rebinding window remains.

Integration (rerank.api, sources.mosaic; the httpx clients for an operator of yours that calls out on httpx)::

    from operators.outbound import check_url, guard_session, guarded_client
    check_url(url, field="url")                 # before sending (or in a pydantic validator: resolve=False);
                                                # raises OutboundURLError naming the field and the reason
    session = guard_session(make_session(...))  # requests: every connection and redirect hop checked
    client = guarded_client(timeout=30)         # httpx.Client, same; guarded_async_client() for httpx.AsyncClient

``tessera serve`` sets ``TESSERA_OUTBOUND=server`` for the app, and the service's replica sets it where it is unset,
for itself and the tasks it starts.
"""

from __future__ import annotations

import os
from typing import Any

from operators._outbound_policy import (ALLOW_ENV, ALLOWED_SCHEMES, LOOPBACK, METADATA_ADDRESSES, METADATA_HOSTS,
                                        MODE_ENV, PRIVATE, OutboundPolicy, OutboundURLError, Resolver, Target,
                                        blocked_reason, check_url, checked_addresses, embedded_ipv4,
                                        literal_address, parse_url, system_resolver)

__all__ = [
    "ALLOW_ENV", "ALLOWED_SCHEMES", "LOOPBACK", "METADATA_ADDRESSES", "METADATA_HOSTS", "MODE_ENV", "PRIVATE",
    "OutboundPolicy", "OutboundURLError", "Resolver", "Target", "blocked_reason", "check_url", "checked_addresses",
    "embedded_ipv4", "literal_address", "parse_url", "system_resolver", "guard_session", "guarded_async_client",
    "guarded_client", "url_param", "use_local_policy_unless_set",
]


def url_param(url: str) -> str:
    """A pydantic validator's check of a URL param: what the URL itself says (scheme, a literal address), as the
    ``ValueError`` pydantic turns into a ParamsError naming the field; every connection is checked again."""
    try:
        check_url(url, resolve=False)
    except OutboundURLError as err:
        raise ValueError(err.message) from None
    return url


def use_local_policy_unless_set() -> None:
    """The CLI's default: loopback allowed, unless ``TESSERA_OUTBOUND`` says otherwise (empty or blank counts as
    unset, as for every other variable: ``setdefault`` kept it, and the policy read it as ``server``)."""
    if not os.environ.get(MODE_ENV, "").strip():
        os.environ[MODE_ENV] = "local"


def guard_session(session: Any, policy: OutboundPolicy | None = None) -> Any:
    """``session`` (requests) with its http/https adapters replaced by guarded ones keeping their retries."""
    from operators._outbound_requests import guard_requests_session

    return guard_requests_session(session, policy)


def guarded_client(policy: OutboundPolicy | None = None, **client_kwargs: Any) -> Any:
    """An ``httpx.Client`` whose every request and connection passes the guard."""
    from operators._outbound_httpx import httpx_client

    return httpx_client(policy, asynchronous=False, **client_kwargs)


def guarded_async_client(policy: OutboundPolicy | None = None, **client_kwargs: Any) -> Any:
    """An ``httpx.AsyncClient`` whose every request and connection passes the guard."""
    from operators._outbound_httpx import httpx_client

    return httpx_client(policy, asynchronous=True, **client_kwargs)
