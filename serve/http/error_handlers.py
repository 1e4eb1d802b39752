"""How the app answers every failure in the shape of ``serve.http.errors``: the handlers of Tessera's own ``ApiError``,
an invalid spec, a body that fails validation or cannot be read, Starlette's 404 and 405, and the guard around them
all (``install``). The refusals of a body FastAPI could not read are worded here, for a client that sent it."""

from __future__ import annotations

import email.message
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from operators.errors import NonFiniteNumberError, SpecError
from serve.http.errors import ApiError, ErrorGuard, error_response, printable, spec_refusal, validation_message

#: Pydantic's error types for a body that is not an object (FastAPI's bytes of a body it did not read as JSON).
NOT_AN_OBJECT = frozenset({"dict_type", "model_attributes_type"})


def not_an_object(content_type: str | None, errors: list[dict[str, Any]], body: bytes = b"") -> str | None:
    """The message of a body refused as "not an object", where pydantic's ("Input should be a valid dictionary") would
    mislead: FastAPI reads a body as JSON only under a JSON content type (else it is bytes), and ``curl -d`` sends
    ``application/x-www-form-urlencoded``, so a valid JSON object was refused: the message says to send the header.
    JSON that is no object is named in JSON's words (``null``, ``an array``); FastAPI takes a ``null`` ``body`` (the
    raw bytes) for a missing one ("Field required"). None for any other error."""
    from operators.json_tree import json_kind

    if not errors or tuple(errors[0].get("loc", ())) != ("body",):
        return None
    if errors[0].get("type") == "missing" and body.strip() == b"null":
        return "body: must be a JSON object, not null"
    if errors[0].get("type") not in NOT_AN_OBJECT:
        return None
    given = errors[0].get("input")
    if not isinstance(given, (bytes, bytearray)):  # read as JSON
        return f"body: must be a JSON object, not {json_kind(given)}"
    sent_as = f"this request's is '{printable(_media_type(content_type).get_content_type())}'" if content_type \
        else "this request has none"
    return (f"body: send it as JSON with the header Content-Type: application/json; {sent_as}, so its body was not "
            "read as JSON")


def _media_type(content_type: str) -> email.message.Message:
    """A Content-Type header parsed as FastAPI parses it to decide whether to read a body as JSON."""
    header = email.message.Message()
    header["content-type"] = content_type
    return header


def _json_typed(request: Request) -> bool:
    """Whether FastAPI read ``request``'s body as JSON, and so kept it whole (``application/json``, ``.../x+json``):
    a form's body is streamed, and cannot be read again."""
    header = _media_type(request.headers.get("content-type") or "")
    subtype = header.get_content_subtype()
    return header.get_content_maintype() == "application" and (subtype == "json" or subtype.endswith("+json"))


#: FastAPI's 400 for a body that JSON decoding raised on other than with a syntax error (invalid UTF-8, too deep).
UNPARSED_BODY = "There was an error parsing the body"


def unparsed_body(cause: BaseException | None) -> str:
    """The 422's message for a body FastAPI's ``json.loads`` raised on (``cause``) other than with a syntax error: an
    integer of more than 4,300 digits (Python's bound on reading one) was said to be "not UTF-8, or nested too
    deeply"."""
    if isinstance(cause, ValueError) and not isinstance(cause, UnicodeDecodeError) and "digits" in str(cause):
        return ("body: not JSON that can be read: it holds an integer of more than 4,300 digits; send a number that "
                "fits the field, or the value as a string")
    return "body: not JSON that can be read (it is not UTF-8, or is nested too deeply)"


def slash_hint(request: Request) -> str:
    """The 404's hint for a path that is a route but for its last ``/`` (the app does not redirect it: serve/api.py);
    a route of any method counts (a 405 would follow), the page's files (a mount) do not."""
    from starlette.routing import Match, Route

    path = request.scope.get("path", "")
    if len(path) < 2 or not path.endswith("/"):
        return ""
    scope = {**request.scope, "path": path[:-1]}
    if any(isinstance(route, Route) and route.matches(scope)[0] != Match.NONE for route in request.app.router.routes):
        return f"; did you mean {request.url.path[:-1]} (no / at the end)?"
    return ""


def install(app: FastAPI) -> None:
    """Give ``app`` the OpenAI error shape for every error and the catch-all 500."""

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, err: ApiError) -> JSONResponse:
        response = error_response(err.status, err.message, param=err.param, kind=err.kind, code=err.code,
                                  extra=err.extra)
        response.headers.update(err.headers)
        return response

    @app.exception_handler(SpecError)
    async def _bad_spec(_: Request, err: SpecError) -> JSONResponse:
        """A flow, step or param a request names is invalid: 422 naming the step and field (a NaN or an infinity:
        ``number_out_of_range``, as ``serve.runs.param_numbers`` names a number JSON does not carry)."""
        code = "number_out_of_range" if isinstance(err, NonFiniteNumberError) else "invalid_spec"
        # a param the service set names a server path (the default index, an index under the home): the client reads
        # it without them, as a run's failure
        return error_response(422, spec_refusal(err), param=err.field, code=code)

    @app.exception_handler(RequestValidationError)
    async def _invalid_body(request: Request, err: RequestValidationError) -> JSONResponse:
        errors = list(err.errors())
        message, param = validation_message(errors, request=True)
        body = await request.body() if _json_typed(request) else b""  # JSON: read whole before it was validated
        if said := not_an_object(request.headers.get("content-type"), errors, body):
            return error_response(422, said, param=param, code="invalid_value")
        # broken JSON is a body that cannot be read, as bytes that are not UTF-8 are (the 400 below)
        unread = any(item.get("type") == "json_invalid" for item in errors)
        return error_response(422, message, param=param, code="invalid_body" if unread else "invalid_value")

    @app.exception_handler(HTTPException)
    async def _http_error(request: Request, err: HTTPException) -> JSONResponse:
        if err.status_code == 400 and err.detail == UNPARSED_BODY:  # FastAPI's, for bytes json cannot decode
            return error_response(422, unparsed_body(err.__cause__), param="body", code="invalid_body")
        if err.status_code == 404:
            message, code = f"no route {request.url.path}{slash_hint(request)}", "not_found"
        elif err.status_code == 405:
            message, code = f"{request.method} is not allowed on {request.url.path}", "method_not_allowed"
        else:
            message, code = str(err.detail), None
        kind = "server_error" if err.status_code >= 500 else "invalid_request_error"
        response = error_response(err.status_code, message, param=getattr(err, "param", None), kind=kind,
                                  code=getattr(err, "code", None) or code)
        response.headers.update(err.headers or {})  # e.g. Allow on a 405
        return response

    app.add_middleware(ErrorGuard)
