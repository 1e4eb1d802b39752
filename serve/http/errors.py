"""Every answer of the HTTP API that is not a success: OpenAI's error shape, and no traceback.

The body is always ``{"error": {"message", "type", "param", "code"}}``, whoever raised it (an ``ApiError`` may add
fields a client reads instead of the message, such as the 409 ``documents_exist``'s ``ids``):
our own ``ApiError``, a body that fails validation (a 422 naming the field, ``body``
when the JSON itself is broken), Starlette's 404 for an unknown route and 405 for a
wrong method, and anything unexpected (a 500 naming the request id; the traceback
goes to the log only). A traceback carries paths, PIDs and other clients' data, so it
never reaches a client.
"""

from __future__ import annotations

import contextvars
import logging
import uuid
from typing import Any

from fastapi.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from operators.errors import SpecError, client_problems
from serve.http.middleware import HttpMiddleware, StartTracker, disconnect_when_cancelled
from serve.http.server_paths import without_server_paths

log = logging.getLogger("tessera.serve")

#: Serve's own logger, which ``LoggingConfig`` configures in each replica (level, format, logs/serve/ file).
SERVE_LOGGER = "ray.serve"


class _ToServe(logging.Handler):
    """Hands each record to the handlers of Serve's logger, as if Serve's own code had logged it."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(SERVE_LOGGER).handle(record)


def log_through_serve() -> bool:
    """Send ``tessera.serve`` records through Serve's replica logging: with its level, time and format into
    ``logs/serve/replica_<app>_<deployment>_*.log`` (and stderr), instead of bare lines in the worker's .err
    file. Called in a replica once Serve has configured its logger; False (nothing changes) elsewhere."""
    import logging.handlers

    serve_logger = logging.getLogger(SERVE_LOGGER)
    if not any(isinstance(handler, logging.handlers.MemoryHandler) for handler in serve_logger.handlers):
        return False  # no replica log file: a driver or a test process (Serve's default logger is stderr only)
    if not any(isinstance(handler, _ToServe) for handler in log.handlers):
        log.addHandler(_ToServe())
    log.setLevel(serve_logger.getEffectiveLevel())
    log.propagate = False  # the worker's root handlers would write each record a second time
    return True

#: The id Serve's proxy gives each HTTP request (its ``X-Request-ID`` response header).
REQUEST_ID_HEADER = "x-request-id"
_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("tessera_request_id", default=None)


class ApiError(Exception):
    """An error answered with ``status`` and an OpenAI-shaped body; ``extra``: more fields of its error object, for
    what a client acts on (the message is prose, for people); ``headers``: the response's (``Retry-After``)."""

    def __init__(self, status: int, message: str, *, param: str | None = None, kind: str = "invalid_request_error",
                 code: str | None = None, extra: dict[str, Any] | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.kind, self.code = status, message, param, kind, code
        self.extra, self.headers = extra or {}, headers or {}


#: The Retry-After of a service that has ``max_tasks`` tasks queued or running: a search task ends in seconds.
TASKS_RETRY_AFTER_S = 10


def too_many_tasks(limits: Any, why: str = "limit") -> ApiError:
    """The 429 of a task refused by the task store's insert (``why``): the key has ``max_tasks_per_key`` tasks queued
    or running (``"limit"``), or the service has ``max_tasks`` of every key's (``"max_tasks"``)."""
    if why == "max_tasks":
        return ApiError(429, f"the service has {limits.max_tasks} tasks queued or running, all keys together, the "
                        f"limit max_tasks={limits.max_tasks}; send it again once one has finished", code="max_tasks",
                        headers={"Retry-After": str(TASKS_RETRY_AFTER_S)})
    limit = limits.max_tasks_per_key
    return ApiError(429, f"this key has {limit} tasks queued or running, the limit max_tasks_per_key={limit}; "
                    "wait for one to finish or cancel one", code="max_tasks_per_key")


#: Why a key may not change another key's index, after "index '<name>' " (``index_refusal``; ``GET /v1/indices``'
#: ``read_only``, ``serve.indices.index_owner.read_only_names``).
NOT_OWNED = "belongs to another key; only its owner can change it"


def index_refusal(limits: Any, name: str, why: str) -> ApiError:
    """Why the task store refused a change to index ``name``: ``"busy:<task>"`` (an ingestion or a compaction of it
    runs, 409), ``"owner"`` (another key made it, 403), else too many tasks (429, ``too_many_tasks``)."""
    if why.startswith("busy:"):
        return ApiError(409, f"index '{name}' has an ingestion or a compaction running (task {why[5:]}); wait for it "
                        "to finish (GET /task/progress/{id}) and send this request again", param="name",
                        code="index_busy")
    if why == "owner":
        return ApiError(403, f"index '{name}' {NOT_OWNED}", param="name", code="index_not_owned")
    return too_many_tasks(limits, why)


def request_id() -> str:
    """The id of the request being answered (Serve's, else one made up here), to find it in the log."""
    rid = _request_id.get()
    if rid is None:
        rid = uuid.uuid4().hex
        _request_id.set(rid)
    return rid


def printable(text: str) -> str:
    """``text`` as it can be encoded: a client's lone surrogate echoed in a message must not break the answer."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_response(status: int, message: str, *, param: str | None = None, kind: str = "invalid_request_error",
                   code: str | None = None, extra: dict[str, Any] | None = None) -> JSONResponse:
    return JSONResponse({"error": _error_body(message, param, kind, code, extra)}, status_code=status)


def error_event(err: ApiError) -> str:
    """``err`` as a server-sent event: how a stream whose headers are sent ends with an error."""
    import json

    return f"data: {json.dumps({'error': _error_body(err.message, err.param, err.kind, err.code, err.extra)})}\n\n"


def _error_body(message: str, param: str | None, kind: str, code: str | None,
                extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """OpenAI's error object, then ``extra``'s fields (never in place of its own four)."""
    body = {"message": printable(message), "type": kind, "param": None if param is None else printable(param),
            "code": code}
    return {**body, **{k: v for k, v in (extra or {}).items() if k not in body}}


def server_error(what: str, err: BaseException, *, code: str) -> ApiError:
    """A 500 that names ``what`` failed and the request id; ``err`` and its traceback go to the log only."""
    rid = request_id()
    log.error("request %s: %s failed", rid, what, exc_info=err)
    return ApiError(500, f"{what} failed (request id {rid}; the details are in the server log)",
                    kind="server_error", code=code)


def insufficient_storage(what: str, err: BaseException) -> ApiError | None:
    """The 507 of a request whose write the server's disk refused (``serve.http.disk_full``); None for any other
    failure. The log names the error, with its file, for the operator; the client, what could not be written."""
    from serve.http.disk_full import not_written, refused_write

    if (refused := refused_write(err)) is None:
        return None
    where, cause = refused
    log.warning("request %s: %s: %s could not be written (%s): the disk refused it; answered 507", request_id(),
                what, where, cause)
    return ApiError(507, f"{what}: {not_written(where)}: nothing of this request was stored, and what was stored "
                    "before is as it was; send it again once the service's operator has freed space",
                    kind="server_error", code="insufficient_storage")


#: The Retry-After of a model deployment that has no replica to answer now: Serve starts another (a killed one was
#: back in about 20 s here, loading MiniLM on 2 busy cores).
UNAVAILABLE_RETRY_AFTER_S = 10


def unavailable(what: str, err: BaseException) -> ApiError | None:
    """The 503 with ``Retry-After`` of a call whose replica died (killed, out of memory, its node lost) or that its
    deployment shed: Serve replaces the replica, so the same request succeeds later; None for any other failure
    (the model's own, a 500). Before, a request in flight when a replica was killed was a 500 ``model_error``."""
    from flows.placement import replica_lost

    if not replica_lost(err):
        return None
    log.warning("request %s: %s lost its replica (%s); answered 503", request_id(), what, type(err).__name__)
    return ApiError(503, f"{what} has no replica to answer now (Serve is starting one); try again in "
                    f"{UNAVAILABLE_RETRY_AFTER_S} s", kind="server_error", code="deployment_unavailable",
                    headers={"Retry-After": str(UNAVAILABLE_RETRY_AFTER_S)})


def validation_message(errors: list[dict[str, Any]], *, request: bool = False) -> tuple[str, str]:
    """The message and ``param`` of a 422: each problem as ``field: why``; ``param`` the first problem's field, the
    path the client sent (``documents.3.id``; ``client_problems``: no union branch of pydantic's). ``request``:
    FastAPI's errors, whose locations start with where the field was sent (body, query, path)."""
    problems: list[tuple[str, str]] = []
    fields = []
    for item in errors:
        loc = tuple(item.get("loc", ()))
        if request and loc and loc[0] in ("body", "query", "path"):
            loc = loc[1:]
        if item.get("type") == "json_invalid":  # its loc is a character offset, not a field
            why = (item.get("ctx") or {}).get("error", "")
            offset = f" at character {loc[0]}" if loc else ""
            problems.append(("body", f"not valid JSON ({why}{offset})" if why else "not valid JSON"))
        else:
            fields.append({**item, "loc": loc, "msg": item.get("msg", "invalid")})
    problems += [(field or "body", why) for field, why in client_problems(fields)]
    message = "; ".join(f"{field}: {why}" for field, why in problems) or "body: invalid"
    return message, problems[0][0] if problems else "body"


def step_field(err: SpecError) -> str | None:
    """The request's path of the field a spec error names: a step's own (``inputs``, a field of ``StepSpec``) as
    ``steps.<id>.inputs``, where the same spec's other errors put it (``steps.b.op``); a whole path, or a mosaicRAG
    step's (``2.id``), as it is."""
    from flows.spec import StepSpec

    if err.step and err.field and err.field.split(".")[0] in StepSpec.model_fields:
        return f"steps.{err.step}.{err.field}"
    return err.field


def spec_refusal(err: SpecError) -> str:
    """The message of a request's 422 for ``err`` (``install``'s handler): its field by the request's path
    (``step_field``), without the server's paths (a saved flow's file under ``$TESSERA_HOME``)."""
    err.field = step_field(err)
    return without_server_paths(str(err))


class ErrorGuard(HttpMiddleware):
    """The outermost layer that answers (only the drain's count, serve/http/draining.py, is outside it): sets the
    request id, and turns an escaped exception into a short 500.

    A pure ASGI middleware rather than a handler for ``Exception``: Starlette re-raises
    after such a handler, and under Serve that logs the traceback a second time."""

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = dict(scope.get("headers") or [])
        token = _request_id.set(headers.get(REQUEST_ID_HEADER.encode(), b"").decode("latin-1") or None)
        tracked = StartTracker(send)
        try:
            await self.app(scope, disconnect_when_cancelled(receive), tracked)
        except Exception as err:  # noqa: BLE001  (anything unexpected: logged, answered without details)
            if tracked.started:  # too late for an error body; the server closes the connection
                raise
            what = f"{scope.get('method', '')} {scope.get('path', '')}"
            failure = insufficient_storage(what, err) or server_error(what, err, code="internal_error")
            await error_response(failure.status, failure.message, kind=failure.kind, code=failure.code)(
                scope, receive, send)
        finally:
            _request_id.reset(token)
