"""HTTP for operators that call a service (rerank.api, sources.mosaic): one retrying session, readable failures.

Retries are urllib3's ``Retry`` on a ``requests`` session, not a loop of our own:
connection errors, timeouts, 429 and 5xx are retried with exponential backoff
(honouring a short ``Retry-After``); any other 4xx fails at once with the server's
message, since sending the same bad request again cannot help. Every session is
guarded (``operators.outbound``): each hop and connection must pass the SSRF policy.
"""

from __future__ import annotations

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError
from urllib3.util.retry import Retry

#: Statuses worth asking again: rate limited, or the service failed on its side.
RETRY_STATUSES = frozenset({429, *range(500, 600)})
#: Longest wait between two attempts, and longest ``Retry-After`` honoured (seconds).
MAX_WAIT_S = 30

_BODY_EXCERPT = 500


def make_session(*, max_retries: int, backoff: float, pool_size: int) -> requests.Session:
    """A guarded session that retries transient failures of any method (the callers' requests are idempotent)."""
    from operators.outbound import guard_session

    retry = Retry(
        total=max_retries, connect=max_retries, read=max_retries, status=max_retries,
        allowed_methods=None,  # None: every method, POST included
        status_forcelist=RETRY_STATUSES,
        backoff_factor=backoff, backoff_jitter=backoff, backoff_max=MAX_WAIT_S, retry_after_max=MAX_WAIT_S,
        raise_on_status=False,  # hand back the last answer so its message reaches the user
    )
    adapter = HTTPAdapter(max_retries=retry, pool_connections=1, pool_maxsize=pool_size)
    session = requests.Session()
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return guard_session(session)


def attempts(response: requests.Response) -> int:
    """How many times the request behind ``response`` was sent."""
    retries = getattr(response.raw, "retries", None)
    return len(getattr(retries, "history", ())) + 1


def status_problem(response: requests.Response, what: str) -> str:
    """``what`` answered <status> <reason> (after n attempts, or why not retried): <body excerpt>."""
    retried = f" after {attempts(response)} attempts" if attempts(response) > 1 else ""
    if response.status_code not in RETRY_STATUSES:
        retried = " (not retried: the request itself was refused)"
    return f"{what} answered {response.status_code} {response.reason}{retried}: {excerpt(response.text)}"


def cause(err: requests.RequestException, session: requests.Session, url: str) -> str:
    """The root of a requests error (a timeout, a refused connection), without urllib3's wrapping."""
    for arg in err.args:
        if isinstance(arg, MaxRetryError):  # the retries ran out
            retry = session.get_adapter(url).max_retries
            return f"{type(arg.reason).__name__}: {arg.reason} (after {(retry.total or 0) + 1} attempts)"
    return f"{type(err).__name__}: {err}"


def excerpt(text: str) -> str:
    """``text`` on one line, cut to a length an error message can carry."""
    from operators.errors import one_line

    return one_line(text, _BODY_EXCERPT)
