"""Who is calling: bearer API keys, checked before any route runs, and the request body limit.

When keys are configured, every route but ``/healthz``, the web UI's static page (``/``,
``/ui/``) and the API's description (``/openapi.json``, its ``/docs`` and ``/redoc`` pages and their
scripts), which hold no data, needs ``Authorization: Bearer KEY``; the key's id (never the
key) becomes the request's *tenant*, which owns its tasks, chats and saved flows; a key revoked in the task store
(``serve.security.revocations``) gets a 401 saying so within seconds, on every replica. Without
keys (a loopback-only service) every caller is the tenant ``local``. Keys are compared by
their SHA-256 in constant time and never logged: a refused request is logged by path and
reason only.

Both checks are pure ASGI middlewares, so no route can forget them, and they read their
settings from ``configure`` (called by the ingress replica with what the app builder
resolved).
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.types import Message, Receive, Scope, Send

# LOCAL_TENANT: the tenant of every request when no keys are configured, an id no key may have
from operators.api_keys import LOCAL_TENANT, key_hash, reserved_id_problem
from operators.errors import see_docs
from serve.http.errors import error_response
from serve.http.middleware import HttpMiddleware, StartTracker
from serve.http.upload_parts import PEEK_BYTES, UploadParts, over_limit_message
from serve.security.revocations import RevocationsUnreadable

log = logging.getLogger("tessera.serve")

#: Where the web UI lives below the app's route prefix (serve/routes/ui.py serves it there).
UI_PATH = "/ui"
#: Routes that answer without a key: the health check, the web UI's page and its files (serve/routes/ui.py),
#: whose every call to the API carries the key typed into it, and the API's description with its pages (whose
#: "Authorize" button takes the key for the calls tried from them).
OPEN_PATHS = frozenset({"/healthz", "/", UI_PATH, "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
OPEN_PREFIXES = (UI_PATH + "/", "/static-offline-docs/")

_settings: dict[str, Any] = {"keys": {}, "max_body_bytes": None, "max_upload_bytes": None, "revocations": None}
#: Routes whose bodies are files (``max_upload_bytes``), not JSON (``max_body_bytes``).
UPLOAD_ROUTE = re.compile(r"/v1/indices/[^/]+/files")


def configure(keys: dict[str, str], max_body_bytes: int | None, max_upload_bytes: int | None = None) -> None:
    """``keys``: SHA-256 hex -> key id (empty: no keys, every caller is ``local``, an id no key may have)."""
    for key_id in keys.values():
        if problem := reserved_id_problem(key_id):
            raise ValueError(problem)
    _settings["keys"] = dict(keys)
    _settings["max_body_bytes"] = max_body_bytes
    _settings["max_upload_bytes"] = max_upload_bytes


def key_ids() -> dict[str, str]:
    """The configured keys: SHA-256 hex -> key id."""
    return dict(_settings["keys"])


def has_keys() -> bool:
    """Whether API keys are configured (else every caller is ``local``)."""
    return bool(_settings["keys"])


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an interface to listen on) is reachable from this machine only."""
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, has_keys: bool, allow_public_without_keys: bool) -> None:
    """Refuse to serve on a non-loopback ``host`` without API keys (``RuntimeError`` naming the fix)."""
    if not has_keys and not allow_public_without_keys and not is_loopback(host):
        raise RuntimeError(f"refusing to listen on {host} without API keys: anyone who reaches the port could run "
                           "flows. Configure args.service.api_keys (hashed) or set TESSERA_API_KEYS, or listen on "
                           "127.0.0.1")


def http_host() -> str:
    """The interface Serve's HTTP proxy listens on (asked of the controller; loopback when it cannot be read)."""
    from ray.serve.context import _get_global_client

    try:
        return str(_get_global_client().http_config.host)
    except Exception:  # noqa: BLE001  (no controller reachable: nothing is exposed either)
        return "127.0.0.1"


def tenant_of(header: str | None, keys: dict[str, str]) -> str | None:
    """The key id for an ``Authorization`` header value (None: missing or unknown key)."""
    known = known_key(header, keys)
    return None if known is None else known[1]


def known_key(header: str | None, keys: dict[str, str]) -> tuple[str, str] | None:
    """The hash and id of the key an ``Authorization`` header value sends (None: missing or unknown key)."""
    if not header or not header.lower().startswith("bearer "):
        return None
    digest = key_hash(header[7:].strip())
    for known, key_id in keys.items():
        if hmac.compare_digest(known, digest):
            return known, key_id
    return None


def use_revocations(revocations: Any) -> None:
    """Check every key against ``revocations`` (``serve.security.revocations.Revocations`` of the service's task store;
    None: none), set by the ``Service`` the app serves."""
    _settings["revocations"] = revocations


def revocations() -> Any:
    return _settings["revocations"]


async def refusal(sent: list[bytes], keys: dict[str, str]) -> tuple[str | None, Any, str]:
    """The tenant of a request that sent the ``Authorization`` headers ``sent``, or None, the response refusing it
    and why, for the log: no valid key (401), a revoked key (401 saying so), revocations that cannot be read (503)."""
    # several: whichever one a proxy or this app read, the request would act as a key it may not hold
    known = known_key(sent[0].decode("latin-1"), keys) if len(sent) == 1 else None
    if known is None:
        message = ("a valid API key is required: send 'Authorization: Bearer KEY'" if len(sent) < 2 else
                   f"send one Authorization header, not {len(sent)}")
        return None, error_response(401, message, code="invalid_api_key"), "no valid API key"
    checked = _settings["revocations"]
    try:
        revoked = checked is not None and await checked.is_revoked(known[0])
    except RevocationsUnreadable:
        return None, error_response(503, "the service cannot read which API keys are revoked (its task store does "
                                    "not answer), so it accepts no key until it can; try again later",
                                    kind="server_error", code="task_store_unavailable"), "revocations unreadable"
    if revoked:  # the id, when and by whom stay out of it: whoever holds a leaked key learns nothing more
        return None, error_response(401, "this API key was revoked: ask the service's operator for a new key",
                                    code="invalid_api_key"), f"revoked key of '{known[1]}'"
    return known[1], None, ""


def route_path(scope: Scope) -> str:
    """The request's path below the app's route prefix (Serve mounts an app at its ``route_prefix``)."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def is_open(path: str) -> bool:
    return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)


def declare_keys(schema: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI ``schema`` saying which operations take the bearer key, when keys are configured: /docs then
    has an "Authorize" button, and the calls tried from it send the key."""
    if _settings["keys"]:
        schema.setdefault("components", {})["securitySchemes"] = {"apiKey": {
            "type": "http", "scheme": "bearer", "description": f"an API key of the service: see {see_docs('security')}",
        }}
        for path, operations in schema.get("paths", {}).items():
            if not is_open(path):
                for operation in operations.values():
                    operation["security"] = [{"apiKey": []}]
    return schema


class KeyGuard(HttpMiddleware):
    """Sets ``request.state.tenant``; answers 401 (OpenAI's shape) to a request without a valid key."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        keys = _settings["keys"]
        tenant: str | None = LOCAL_TENANT
        if keys and not is_open(route_path(scope)):
            sent = [value for name, value in scope.get("headers") or [] if name == b"authorization"]
            tenant, response, why = await refusal(sent, keys)
            if response is not None:
                log.info("refused %s %s: %s", scope.get("method"), scope.get("path"), why)
                if response.status_code == 401:
                    response.headers["WWW-Authenticate"] = "Bearer"
                await response(scope, receive, send)
                return
        scope.setdefault("state", {})["tenant"] = tenant
        await self.app(scope, receive, send)


class _BodyTooLarge(HTTPException):
    """Raised while the body streams in: FastAPI passes an HTTPException through its body parsing unchanged (and
    answers it itself, with ``param`` and ``code``, when the route is already reading the body)."""

    def __init__(self, name: str, limit: int, parts: UploadParts | None = None) -> None:
        super().__init__(413, _over_limit(name, limit, None, parts))
        self.param, self.code = _param(name), name


class BodyLimit(HttpMiddleware):
    """413 naming ``max_body_bytes`` (``max_upload_bytes`` for a file upload) for a body over the limit, whether
    it says its length or streams. An upload's names ``files``, as the upload form's other refusals do, with the
    files its form named so far and their sizes (``serve.http.upload_parts``)."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        name = "max_upload_bytes" if UPLOAD_ROUTE.fullmatch(route_path(scope)) else "max_body_bytes"
        limit = _settings[name]
        if not limit:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        parts = UploadParts(headers.get(b"content-type", b"").decode("latin-1")) if name == "max_upload_bytes" \
            else None
        declared = headers.get(b"content-length", b"").decode("latin-1")
        if declared.isascii() and declared.isdigit() and (len(declared) > 18 or int(declared) > limit):
            if parts is not None and headers.get(b"expect", b"").lower() != b"100-continue":
                await _peek(receive, parts)  # what a client that waits for "go ahead" has not sent is not asked for
            await self._refuse(scope, receive, send, name, limit, int(declared), parts)
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if parts is not None:
                    parts.feed(message.get("body", b""))
                if seen > limit:
                    raise _BodyTooLarge(name, limit, parts)
            return message

        tracked = StartTracker(send)
        try:
            await self.app(scope, counted, tracked)
        except _BodyTooLarge:
            if not tracked.started:
                await self._refuse(scope, receive, send, name, limit, None, parts)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, name: str, limit: int, declared: int | None,
                      parts: UploadParts | None) -> None:
        await error_response(413, _over_limit(name, limit, declared, parts), param=_param(name),
                             code=name)(scope, receive, send)


async def _peek(receive: Receive, parts: UploadParts) -> None:
    """Up to ``PEEK_BYTES`` of a body that is over the limit, through ``parts``: its first files' names."""
    seen = 0
    while seen < PEEK_BYTES:
        message = await receive()
        if message["type"] != "http.request":
            return
        body = message.get("body", b"")[:PEEK_BYTES - seen]
        parts.feed(body)
        seen += len(body)
        if not message.get("more_body"):
            return


def _param(name: str) -> str:
    return "files" if name == "max_upload_bytes" else "body"


def _over_limit(name: str, limit: int, declared: int | None, parts: UploadParts | None) -> str:
    if parts is None:
        return f"the request body is over the limit {name}={limit}"
    return over_limit_message(limit, declared, parts.files)
