"""What a failed model call was (``LLMError.kind``) and what its message says, from litellm's exceptions.

Why a module of its own: how litellm and the servers behind it say a failure (its exception classes, the transport
error a few links down, the words of a missing key, a proxy's page instead of JSON) changes with litellm and the
servers, not with how ``operators.llm.gateway`` makes a call.
"""

from __future__ import annotations

import json
import re
import ssl
from typing import Any, Literal

ErrorKind = Literal["timeout", "rate_limit", "connection", "auth", "bad_request", "not_found", "api"]


class UnusableStream(ValueError):
    """A streamed reply that passed what its max_tokens allows (read no further), or that was no stream of events."""


def failure_kind(err: Exception) -> ErrorKind:
    """A reply that is not UTF-8 is ``api``; else litellm's exception class first; then the transport error it wraps;
    then its message, for the missing key that litellm's OpenAI client reports as an ``InternalServerError`` or an
    ``APIError`` ("Missing credentials")."""
    import litellm

    from operators.errors import in_chain

    if in_chain(err, UnicodeDecodeError) is not None or _error_in_reply(err) is not None:  # (litellm: a "bad
        return "api"  # request" for an error object in a 200, a lost connection for a stream that is not UTF-8)
    checks: list[tuple[Any, ErrorKind]] = [
        (litellm.Timeout, "timeout"), (litellm.RateLimitError, "rate_limit"),
        (litellm.AuthenticationError, "auth"), (litellm.NotFoundError, "not_found"),
        (litellm.BadRequestError, "bad_request"), (litellm.APIConnectionError, "connection"),
    ]
    for cls, kind in checks:
        if isinstance(err, cls):
            return kind
    return _transport_kind(err) or ("auth" if _MISSING_KEY.search(str(err)) else "api")


#: How litellm and the OpenAI client say that no key was given (an ``InternalServerError`` in litellm 1.110).
_MISSING_KEY = re.compile(r"Missing credentials|api_key client option must be set|OPENAI_API_KEY environment variable"
                          r"|No API key provided", re.IGNORECASE)


def _transport_kind(err: BaseException) -> ErrorKind | None:
    """``timeout`` or ``connection`` when the error came from the transport: litellm reports a refused or reset
    connection to an OpenAI-compatible server as an ``InternalServerError`` ("Connection error."), the cause of
    which, a few links down, is httpx's."""
    import httpx

    from operators.errors import in_chain

    link = in_chain(err, httpx.TransportError)  # (a timeout is a transport error too)
    if link is None:
        return None
    return "timeout" if isinstance(link, httpx.TimeoutException) else "connection"


def failure_detail(err: Exception) -> str:
    """What went wrong, in a few words: ``connection refused`` for a refused connection (litellm says it as
    "Connection error." or "[Errno 111] Connection refused" depending on the provider), else litellm's class
    and first line."""
    from operators.errors import in_chain

    if isinstance(err, UnusableStream):
        return str(err)
    if (message := _error_in_reply(err)) is not None:
        return f"the server's reply is an error, not a completion: {_first_line(message)}"
    if in_chain(err, ConnectionRefusedError) is not None or re.search(r"\[Errno 111\]|Connection refused", str(err)):
        return "connection refused"
    if in_chain(err, UnicodeDecodeError) is not None or "codec can't decode" in str(err):
        return "the server's reply is not UTF-8 text"
    if in_chain(err, json.JSONDecodeError) is not None or re.search(r"Expecting value: line \d+", str(err)):
        return "the server's reply is not valid JSON"
    if (problem := _not_a_completion(str(err))) is not None:
        return problem
    if (tls := in_chain(err, ssl.SSLError)) is not None:  # litellm said "Connection error." and no more
        reason = getattr(tls, "reason", None) or str(tls)
        plain = reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST")  # (OpenSSL's names)
        return f"the TLS handshake failed ({reason})" + (
            ": an https:// api_base for a server that speaks plain http fails so" if plain else "")
    detail = f"{type(err).__name__}: {_first_line(err)}"
    import litellm

    if isinstance(err, litellm.ContextWindowExceededError) and getattr(err, "llm_provider", "") != "tessera":
        # a server's words name no param of Tessera's (the embedded model's say what to lower already)
        detail += (" (the prompt does not fit the model's context window: give the flow's generate.context step a "
                   "smaller max_context_length, or the step a smaller max_tokens)")
    return detail


def _error_in_reply(err: BaseException) -> str | None:
    """The message of an HTTP 200 whose JSON is an error object (``{"error": {"message": "..."}}``, as OpenRouter
    sends when the provider behind it failed), or None: litellm raises it as a bare ``Exception`` that carries the
    message as an attribute, wrapped in errors whose text is empty ("BadRequestError: BadRequestError")."""
    link: BaseException | None = err
    for _ in range(8):
        if link is None:
            return None
        if type(link) is Exception and getattr(link, "message", None):
            return str(link.message)
        link = link.__cause__ or link.__context__
    return None


#: What litellm says of an HTTP 200 whose body is text, not JSON (a proxy's error or login page), and of JSON
#: without ``choices``: "InternalServerError: Empty or invalid response from LLM endpoint..." and "InternalServerError:
#: litellm.APIError: LiteLLM: provider returned a response with no 'choices'", which read as the server's failure.
_NOT_JSON = re.compile(r"Empty or invalid response from LLM endpoint\. Received: (.*?)\. Check the reverse proxy", re.S)
_NO_CHOICES = re.compile(r"provider returned a response with no 'choices'\. Raw keys: (\[.*?\])")
#: What litellm says of a completion whose parts are not OpenAI's (``content`` a list or a number, a choice without
#: ``message``, ``usage`` in words): "Invalid response object Traceback (most recent call last): ..." and its whole
#: traceback, then pydantic's error ("1 validation error for Message\ncontent\n  Input should be a valid string
#: [type=...") or the exception that ended it ("KeyError: 'message'").
_BAD_OBJECT = re.compile(r"Invalid response object Traceback \(most recent call last\):(.*?)(?:received_args=|$)",
                         re.S)
_INVALID_FIELD = re.compile(r"validation errors? for (\w+)\n(\S+)\n\s+(.+?)(?: \[type=|\n|$)")
_LAST_ERROR = re.compile(r"^(?:[\w.]+\.)?(\w+(?:Error|Exception)(?::.*)?)$", re.M)


def _not_a_completion(text: str) -> str | None:
    """An HTTP 200 that is no completion, in the words the other such replies get (``the server's reply is not valid
    JSON``, ``has no choices``), with what it was; None for any other error."""
    if (page := _NOT_JSON.search(text)) is not None:
        body = " ".join(page[1].strip("'\"").split())
        shown = repr(body if len(body) <= 60 else body[:60] + "...")
        return "the server's reply is not valid JSON" + (f", so no completion: {shown}" if body else " (it is empty)")
    if (keys := _NO_CHOICES.search(text)) is not None:
        return f"the server's reply is not a completion: it has no choices (its keys: {keys[1]})"
    if (bad := _BAD_OBJECT.search(text)) is not None:
        field, errors = _INVALID_FIELD.search(bad[1]), _LAST_ERROR.findall(bad[1])
        what = (f"{field[1]}.{field[2]}: {field[3]}" if field else errors[-1].strip() if errors else "")
        return "the server's reply is not a completion in OpenAI's shape" + (f" ({what})" if what else "")
    return None


#: The exception names litellm writes before a message, nested when it wraps one error in another:
#: "litellm.InternalServerError: InternalServerError: OpenAIException - litellm.APIError: LiteLLM: ...".
_PREFIXES = re.compile(r"^(?:(?:litellm\.)?\w+(?:Error|Exception)(?:: | - )|LiteLLM: )+")


def _first_line(err: Exception | str) -> str:
    """The error's first line, without the exception names litellm writes before it, however nested."""
    text = str(err).strip().splitlines()
    line = _PREFIXES.sub("", text[0]) if text else ""
    return line[:500] or type(err).__name__
