"""Reranking through an external rerank API (Cohere, Jina, Hugging Face TEI, Tessera's own /v1/rerank)."""

from __future__ import annotations

import os
import re
from typing import Any, ClassVar, Literal, Sequence

import numpy as np
from pydantic import Field, SecretStr, ValidationInfo, field_validator

from operators.errors import FlowCancelled, OperatorError, see_docs
from operators.interrupt import checkpoint, each_concurrently
from operators.local_files import env_var, secret, sent_headers
from operators.outbound import url_param
from operators.redact import remember_secret
from operators.rerank.base import RerankParams, Reranker

#: Documents per request when ``max_documents_per_request`` is unset: Cohere's and Jina's
#: limit, and TEI's default ``--max-client-batch-size``.
DEFAULT_DOCUMENTS_PER_REQUEST = {"cohere": 1000, "jina": 1000, "tei": 32}
#: Where the key goes unless ``api_key_header`` names another header: as ``Bearer <key>`` (Cohere, Jina, TEI).
KEY_HEADER = "Authorization"
#: An HTTP header name (RFC 9110's token).
HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
#: Headers the request sets itself, which a key may not replace.
RESERVED_HEADERS = frozenset({"accept", "content-type", "content-length", "host", "transfer-encoding", "connection"})


class ApiReranker(Reranker):
    """Rerank each query's top candidates with a hosted rerank service over HTTP.

    Speaks the Cohere/Jina request (``{"model", "query", "documents", "top_n"}``) or
    TEI's (``{"query", "texts"}``) and reads either answer shape. Each query's
    candidates go in requests of at most ``max_documents_per_request`` documents, each
    asking for every score (these services score each document on its own, so scores
    from several requests can be merged). Transient failures (connection, timeout,
    429, 5xx) are retried with backoff; an answer that does not score every document
    exactly once fails the query, and the shared ``on_error`` policy decides what
    happens then. The output is never cached: the service can change under it.

    Usage::

        ApiReranker({"url": "https://api.cohere.com/v2/rerank", "model": "rerank-v3.5",
                    "api_key_env": "COHERE_API_KEY", "n": 50})(first_stage_results)
    """

    name = "rerank.api"
    aliases = ("api_rerank",)
    cacheable: ClassVar[bool] = False

    class Params(RerankParams):
        url: str = Field(..., min_length=1, description="The service's rerank endpoint, e.g. "
                         "https://api.cohere.com/v2/rerank, https://api.jina.ai/v1/rerank, a TEI server's /rerank, "
                         "or Tessera's own /v1/rerank. Loopback and private addresses need TESSERA_ALLOW_HOSTS "
                         f"outside the CLI: see {see_docs('security')}.")
        format: Literal["cohere", "jina", "tei"] = Field("cohere", description="Request format: 'cohere' and "
                                                         "'jina' send query/documents/top_n (+ model); 'tei' sends "
                                                         "query/texts. Either answer shape is accepted.")
        model: str | None = Field(None, description="Model name sent with Cohere/Jina requests (e.g. "
                                  "'rerank-v3.5'); null leaves it out (TEI and Tessera serve one model).")
        api_key: SecretStr | None = Field(None, json_schema_extra=secret("api_key_env"), description="The key, "
                                          "for a spec of your own (CLI, Python); never logged. The service "
                                          "refuses it (a saved flow or a task would keep it): use api_key_env.")
        api_key_env: str | None = Field(None, min_length=1, json_schema_extra=env_var(), description="Name of "
                                        "the environment variable holding the key (e.g. COHERE_API_KEY), read at "
                                        "setup.")
        api_key_header: str = Field(KEY_HEADER, min_length=1, description="The header the key is sent in: "
                                    "Authorization (the default) as 'Bearer <key>', any other (e.g. X-Api-Key, "
                                    "api-key) as the key alone.")
        timeout: float = Field(30.0, gt=0, description="Seconds to wait for a connection or an answer, per "
                               "attempt.")
        max_retries: int = Field(3, ge=0, description="Retries after a connection error, a timeout, a 429 or a "
                                 "5xx; other 4xx answers are never retried.")
        backoff: float = Field(0.5, ge=0, description="Backoff factor in seconds: the retries wait about 0, "
                               "2x, 4x, ... this (with jitter, at most 30 s); a Retry-After of up to 30 s is "
                               "honoured.")
        max_documents_per_request: int | None = Field(None, gt=0, description="Most documents in one request; "
                                                      "more are split over several requests and merged. Default: "
                                                      "1000 for cohere/jina, 32 for tei.")
        max_chars_per_document: int | None = Field(None, gt=0, description="Cut each document to this many "
                                                   "characters before sending; null sends it whole.")
        user_headers: dict[str, str] | None = Field(None, json_schema_extra=sent_headers("api_key_env"),
                                                    description="Extra headers sent with every request (e.g. "
                                                    "X-OpenWebUI-User-Id); none by default. The service refuses one "
                                                    "that carries a key (X-Api-Key, Cookie...): see "
                                                    f"{see_docs('security')}.")
        concurrent_requests: int = Field(4, gt=0, description="Queries of a batch sent at the same time.")

        @field_validator("url")
        @classmethod
        def _outbound_url(cls, url: str) -> str:
            return url_param(url)

        @field_validator("api_key_env")
        @classmethod
        def _one_key_source(cls, name: str | None, info: ValidationInfo) -> str | None:
            if name is not None and info.data.get("api_key") is not None:
                raise ValueError("set api_key or api_key_env, not both")
            return name

        @field_validator("api_key_header")
        @classmethod
        def _header_for_a_key(cls, header: str, info: ValidationInfo) -> str:
            if not HEADER_NAME.fullmatch(header):
                raise ValueError(f"'{header}' is not an HTTP header name (letters, digits and !#$%&'*+-.^_`|~)")
            if header.lower() in RESERVED_HEADERS:
                raise ValueError(f"{header} is a header the request sets itself; name the one the service reads "
                                 "its key from (Authorization, X-Api-Key...)")
            # not for the default (Authorization): the Ray executor sends every default written out, a keyless API's too
            keyless = info.data.get("api_key") is None and info.data.get("api_key_env") is None
            if keyless and header.lower() != KEY_HEADER.lower():
                raise ValueError("names the header of a key, and no key is set: set api_key_env (or api_key)")
            return header

        @field_validator("user_headers")
        @classmethod
        def _no_key_header(cls, headers: dict[str, str] | None, info: ValidationInfo) -> dict[str, str] | None:
            taken = {KEY_HEADER.lower(), str(info.data.get("api_key_header") or KEY_HEADER).lower()}
            for name in headers or {}:
                if name.lower() in taken:
                    raise ValueError(f"must not set {name}, the header of the key; use api_key_env (or api_key)")
            return headers

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._session = None
        self._headers: dict[str, str] = {}

    def setup(self) -> None:
        if self._session is not None:
            return
        from operators.rerank._rerank_http import make_session

        p = self.params
        headers = {"Accept": "application/json", **(p.user_headers or {})}
        key = p.api_key.get_secret_value() if p.api_key is not None else None
        if p.api_key_env is not None:
            key = os.environ.get(p.api_key_env)
            if not key:
                raise OperatorError(f"api_key_env names ${p.api_key_env}, which is not set; export it or pass "
                                    "api_key", op=self.name, step=self.step_id)
        if key:
            remember_secret(key)
            bearer = p.api_key_header.lower() == KEY_HEADER.lower()
            headers[p.api_key_header] = f"Bearer {key}" if bearer else key
        self._headers = headers
        self._session = make_session(max_retries=p.max_retries, backoff=p.backoff, pool_size=p.concurrent_requests)

    def score_queries(self, queries: Sequence[str], texts: Sequence[Sequence[str]]) -> list[np.ndarray | Exception]:
        workers = min(self.params.concurrent_requests, len(queries))
        if workers <= 1:
            return super().score_queries(queries, texts)
        return each_concurrently(lambda _, pair: self._score_or_error(*pair), list(zip(queries, texts)), workers)

    def _score_or_error(self, query: str, texts: Sequence[str]) -> np.ndarray | Exception:
        try:
            return self.score_texts(query, texts)
        except FlowCancelled:
            raise
        except Exception as err:  # noqa: BLE001  (the failure policy decides)
            return err

    def score_texts(self, query: str, texts: Sequence[str]) -> np.ndarray:
        from operators.rerank._rerank_http import parse_scores, post_json, request_body

        p = self.params
        limit = p.max_documents_per_request or DEFAULT_DOCUMENTS_PER_REQUEST[p.format]
        documents = [t[: p.max_chars_per_document] for t in texts] if p.max_chars_per_document else list(texts)
        scores = np.empty(len(documents), dtype=np.float64)
        for start in range(0, len(documents), limit):
            checkpoint()  # a cancelled flow stops between requests, not after all of them
            chunk = documents[start:start + limit]
            answer = post_json(self._session, p.url, request_body(p.format, p.model, query, chunk),
                               headers=self._headers, timeout=p.timeout)
            scores[start:start + len(chunk)] = parse_scores(answer, len(chunk))
        return scores
