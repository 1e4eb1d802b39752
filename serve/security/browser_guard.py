"""A service without API keys, listening on loopback, answers this machine's own clients only, not a web page.

Without keys every caller is the tenant ``local``, and a browser on the same machine is a caller too: any page it
opens may send a cross-origin "simple" request (a multipart ``POST``, which needs no CORS preflight) to
``http://127.0.0.1:PORT``, and it was taken: a page uploaded files into a new index, which an ingestion task then
built (cross-site request forgery). A page may also rebind its own host name to 127.0.0.1 (DNS rebinding): its
requests are then same-origin for the browser, which lets it read every answer (tasks, results, documents).

So, while no keys are configured and the HTTP proxy listens on loopback (``configure``):

* the ``Host`` header must name this machine (``localhost`` or a loopback address, any port): a rebound name is a
  403 ``host_not_allowed``;
* a request a browser marks as coming from another origin (an ``Origin`` other than the service's own, ``Origin:
  null``, or ``Sec-Fetch-Site`` other than ``same-origin``/``none``) is a 403 ``cross_origin``; a ``GET``/``HEAD``
  of a page that holds no data (the web UI, ``/docs``, ``/healthz``: ``auth.is_open``) stays open, so a link to
  the UI from another page still opens it.

In either mode, a request that sends ``Host``, ``Origin`` or ``Sec-Fetch-Site`` more than once is a 400
``duplicate_header`` naming it: the checks read one value (the last), and a proxy in front may have read another.

With keys, the key is what a page cannot send (browsers never add an ``Authorization`` header on their own, and
this service answers no CORS preflight), so nothing here applies: a service behind a proxy that keeps the public
``Host`` needs keys anyway (``auth.check_exposure``).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket

from starlette.types import Receive, Scope, Send

from operators.errors import see_docs
from serve.security import auth
from serve.http.errors import error_response
from serve.http.middleware import HttpMiddleware

log = logging.getLogger("tessera.serve")

_settings = {"local_only": False}
#: ``Sec-Fetch-Site`` values of a request the service's own page (``same-origin``) or the user (``none``: typed
#: into the address bar, a bookmark) made.
OWN_SITES = frozenset({"same-origin", "none"})
#: The headers a request may send once only (a 400 naming the header otherwise, with or without keys, as the key
#: check refuses two ``Authorization`` headers): the name as the server gets it, and as the error names it.
ONE_EACH = {b"host": "Host", b"origin": "Origin", b"sec-fetch-site": "Sec-Fetch-Site"}


def configure(local_only: bool) -> None:
    """``local_only``: no keys, and the HTTP proxy listens on loopback (the ingress replica decides, at start)."""
    _settings["local_only"] = local_only


def host_name(host: str) -> str:
    """The name or address of a ``Host`` header's value, without its port (``[::1]:8000`` -> ``::1``)."""
    if host.startswith("["):
        return host[1:].split("]", 1)[0]
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def is_this_machine(host: str) -> bool:
    """``localhost`` or a loopback address, in any form a client may write one: ``::ffff:127.0.0.1`` (IPv4 mapped)
    and the short IPv4 forms that ``curl`` and ``inet_aton`` read (``127.1``, ``0x7f.1``), none of which DNS can
    rebind."""
    name = host_name(host).lower().rstrip(".")
    if name == "localhost":
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        if not re.fullmatch(r"[0-9a-fx.]+", name):
            return False
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(name))
        except OSError:
            return False
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def foreign_origin(headers: dict[bytes, bytes], scheme: str, host: str) -> str | None:
    """The header that says a browser sent the request from another origin, or None."""
    origin = headers.get(b"origin", b"").decode("latin-1").strip()
    if origin and origin.lower() != f"{scheme}://{host}".lower():
        return "Origin"
    site = headers.get(b"sec-fetch-site", b"").decode("latin-1").strip().lower()
    if site and site not in OWN_SITES:
        return "Sec-Fetch-Site"
    return None


def repeated_header(headers: list[tuple[bytes, bytes]]) -> tuple[str, int] | None:
    """The first of ``ONE_EACH`` the request sends more than once, and how many times: the checks here read one value
    (a dict of the headers keeps the last), and a proxy in front may have read another."""
    for name, shown in ONE_EACH.items():
        count = sum(1 for key, _ in headers if key == name)
        if count > 1:
            return shown, count
    return None


class LocalBrowsers(HttpMiddleware):
    """403 for a rebound ``Host`` or a cross-origin browser request while the service has no keys (module doc)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (twice := repeated_header(scope.get("headers") or [])) is not None:
            name, count = twice
            log.info("refused %s %s: %d %s headers", scope.get("method"), scope.get("path"), count, name)
            await error_response(400, f"send one {name} header, not {count}: which one a proxy or this service read "
                                 "would be a guess", param=name, code="duplicate_header")(scope, receive, send)
            return
        if not _settings["local_only"] or auth.has_keys():
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        host = headers.get(b"host", b"").decode("latin-1").strip()
        if host and not is_this_machine(host):
            log.info("refused %s %s: Host %r is not this machine", scope.get("method"), scope.get("path"), host)
            await error_response(403, f"Host '{host}' is not this machine: this service has no API keys, so it "
                                 "answers requests to localhost or a loopback address only (a web page that rebinds "
                                 "its own name to this machine is refused); configure API keys to serve other names: "
                                 f"see {see_docs('security')}", param="Host",
                                 code="host_not_allowed")(scope, receive, send)
            return
        page = scope.get("method") in ("GET", "HEAD") and auth.is_open(auth.route_path(scope))
        header = None if page else foreign_origin(headers, scope.get("scheme", "http"), host)
        if header is not None:
            log.info("refused %s %s: sent from another origin (%s)", scope.get("method"), scope.get("path"), header)
            await error_response(403, f"a request from another origin (its {header} header): this service has no API "
                                 "keys, so it answers its own web UI and clients that are not browsers only (any "
                                 "page could otherwise act as this machine's user); configure API keys to call it "
                                 f"from other pages: see {see_docs('security')}", param=header,
                                 code="cross_origin")(scope, receive, send)
            return
        await self.app(scope, receive, send)
