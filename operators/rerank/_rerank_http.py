"""The HTTP side of ``rerank.api``: one request per batch of documents, retries, strict reading.

Kept apart from the operator so the wire formats and the validation of what a
service answers can be read (and reused) on their own. The session and its retries
are ``operators.http``'s (urllib3's ``Retry``: connection errors, timeouts, 429 and
5xx retried with backoff; any other 4xx fails at once with the server's message).
"""

from __future__ import annotations

import math
from typing import Any, Literal, Mapping, Sequence

import numpy as np
import requests

from operators.http import cause, excerpt, make_session, status_problem

__all__ = ["RerankApiError", "make_session", "parse_scores", "post_json", "request_body"]

from operators.redact import redact

Format = Literal["cohere", "jina", "tei"]


class RerankApiError(RuntimeError):
    """A rerank service could not be reached, refused the request, or answered something unusable."""

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))  # a server may echo the key back in its error body


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
        raise RerankApiError(f"POST {url} failed: {cause(err, session, url)}") from err
    if response.status_code >= 400:
        raise RerankApiError(status_problem(response, f"POST {url}"))
    try:
        return response.json()
    except ValueError:
        raise RerankApiError(f"POST {url} answered {response.status_code} with a body that is not JSON: "
                             f"{excerpt(response.text)}") from None


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
                             f"[...]): {excerpt(repr(payload))}")
    scores = np.full(n_documents, np.nan)
    seen: set[int] = set()
    for item in items:
        if not isinstance(item, dict):
            raise RerankApiError(f"a result is not an object: {excerpt(repr(item))}")
        index = _as_index(item.get("index"))
        if index is None:
            raise RerankApiError(f"a result has no integer 'index': {excerpt(repr(item))}")
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
