"""The HTTP side of ``rerank.api``: one request per batch of documents, retries, strict reading.

Kept apart from the operator so the wire formats and the validation of what a
service answers can be read (and reused) on their own. Retries are urllib3's
``Retry`` on a ``requests`` session, not a loop of our own: connection errors,
timeouts, 429 and 5xx are retried with exponential backoff (honouring a short
``Retry-After``); any other 4xx fails at once with the server's message, since
sending the same bad request again cannot help.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError
from urllib3.util.retry import Retry

from operators.redact import redact

Format = Literal["cohere", "jina", "tei"]

#: Statuses worth asking again: rate limited, or the service failed on its side.
RETRY_STATUSES = frozenset({429, *range(500, 600)})
#: Longest wait between two attempts, and longest ``Retry-After`` honoured (seconds).
MAX_WAIT_S = 30

_BODY_EXCERPT = 500


class RerankApiError(RuntimeError):
    """A rerank service could not be reached, refused the request, or answered something unusable."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))  # a server may echo the key back in its error body


def make_session(*, max_retries: int, backoff: float, pool_size: int) -> requests.Session:
    """A session that retries transient failures of any method (a rerank POST is idempotent)."""
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
    return session


def request_body(fmt: Format, model: str | None, query: str, documents: Sequence[str]) -> dict[str, Any]:
    """The JSON a service of format ``fmt`` expects; every document's score is asked for."""
    if fmt == "tei":
        return {"query": query, "texts": list(documents), "raw_scores": False, "truncate": True}
    body: dict[str, Any] = {"query": query, "documents": list(documents), "top_n": len(documents)}
    if model is not None:
        body["model"] = model
    return body


def post_json(session: requests.Session, url: str, body: Mapping[str, Any], *, headers: Mapping[str, str],
              timeout: float) -> Any:
    """POST ``body`` and return the decoded JSON answer; any failure is a ``RerankApiError``."""
    try:
        response = session.post(url, json=body, headers=dict(headers), timeout=timeout)
    except requests.RequestException as err:
        raise RerankApiError(f"POST {url} failed: {_cause(err, session, url)}") from err
    if response.status_code >= 400:
        attempts = _attempts(response)
        retried = f" after {attempts} attempts" if attempts > 1 else ""
        if response.status_code not in RETRY_STATUSES:
            retried = " (not retried: the request itself was refused)"
        raise RerankApiError(f"POST {url} answered {response.status_code} {response.reason}{retried}: "
                             f"{_excerpt(response.text)}")
    try:
        return response.json()
    except ValueError:
        raise RerankApiError(f"POST {url} answered {response.status_code} with a body that is not JSON: "
                             f"{_excerpt(response.text)}") from None


def parse_scores(payload: Any, n_documents: int) -> np.ndarray:
    """One score per document from a rerank answer, in document order.

    Accepts the Cohere/Jina shape ``{"results": [{"index", "relevance_score"}]}`` (or
    ``"data"`` in place of ``"results"``) and TEI's bare ``[{"index", "score"}]``,
    whatever format was asked for. Anything that does not give every document exactly
    one finite score is an error, never a silent partial ranking.
    """
    items = payload.get("results", payload.get("data")) if isinstance(payload, dict) else payload
    if not isinstance(items, list):
        raise RerankApiError('the answer holds no list of results (expected {"results": [...]} or a bare list '
                             f"[...]): {_excerpt(repr(payload))}")
    scores = np.full(n_documents, np.nan)
    seen: set[int] = set()
    for item in items:
        if not isinstance(item, dict):
            raise RerankApiError(f"a result is not an object: {_excerpt(repr(item))}")
        index = _as_index(item.get("index"))
        if index is None:
            raise RerankApiError(f"a result has no integer 'index': {_excerpt(repr(item))}")
        if not 0 <= index < n_documents:
            raise RerankApiError(f"result index {index} is out of range for {n_documents} documents")
        if index in seen:
            raise RerankApiError(f"result index {index} appears more than once")
        score = item.get("relevance_score", item.get("score"))
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise RerankApiError(f"result {index} has no finite numeric 'relevance_score'/'score': {score!r}")
        seen.add(index)
        scores[index] = float(score)
    if len(seen) < n_documents:
        raise RerankApiError(f"the service scored {len(seen)} of {n_documents} documents")
    return scores


def _as_index(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _attempts(response: requests.Response) -> int:
    retries = getattr(response.raw, "retries", None)
    return len(getattr(retries, "history", ())) + 1


def _cause(err: requests.RequestException, session: requests.Session, url: str) -> str:
    """The root of a requests error (a timeout, a refused connection), without urllib3's wrapping."""
    for arg in err.args:
        if isinstance(arg, MaxRetryError):  # the retries ran out
            retry = session.get_adapter(url).max_retries
            return f"{type(arg.reason).__name__}: {arg.reason} (after {(retry.total or 0) + 1} attempts)"
    return f"{type(err).__name__}: {err}"


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _BODY_EXCERPT else text[:_BODY_EXCERPT] + "…"
