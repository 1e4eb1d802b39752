"""Results from a MOSAIC search service (the Open Web Index's search API; mosaicRAG's MosaicDataSource)."""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, Literal

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

from operators.base import Operator
from operators.errors import OperatorError
from operators.local_files import env_var
from operators.outbound import url_param
from operators.redact import remember_secret
from operators.tables import set_ranking

log = logging.getLogger("operators.sources")

#: What MOSAIC says about a result, and the column each lands in.
RESULT_FIELDS = {"title": "title", "url": "url", "textSnippet": "snippet", "language": "language",
                 "warcDate": "warc_date", "wordCount": "word_count"}


class MosaicError(OperatorError):
    """A MOSAIC service could not be reached, refused a request, or answered something that is not MOSAIC's."""


class MosaicSource(Operator):
    """Search a MOSAIC service for each query; its results become the query's rows, full text included.

    Calls ``GET {url}/search?q=&index=&lang=&limit=`` (``search_index: all`` leaves ``index``
    out and MOSAIC answers one list per index), then ``GET {url}/full-text?id=`` for each
    result, concurrently, into ``output_column`` (the result's ``textSnippet`` with
    ``full_text: false``). Rows keep MOSAIC's order: score ``1/position`` within its index,
    so the lists of several indices interleave; ``source_index`` says which index a row
    came from. MOSAIC's search has no offset: ``limit`` is the whole page. Connection
    errors, timeouts, 429 and 5xx are retried (urllib3's Retry); what still fails either
    fails the step with the URL, the status and the service's message (``on_error:
    error``, the default) or, with ``degrade``, leaves the query without rows (a failed
    search) or with the snippet as its text (a failed full text), marked ``degraded`` in
    the flow result's metadata. An index MOSAIC does not have is an error that lists the
    ones it has (``GET /index-info``). Never cached: the index changes under it.

    Usage::

        MosaicSource({"url": "http://127.0.0.1:8008", "search_index": "simplewiki", "limit": 5})(
            pa.table({"qid": ["q1"], "query": ["honey bees"]}))
        # 5 rows: qid, query, docno (MOSAIC id), title, url, snippet, text, source_index, score, rank
    """

    name = "sources.mosaic"
    aliases = ("mosaic_datasource", "MosaicDataSource")
    scope = "query"
    cacheable: ClassVar[bool] = False

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        url: str = Field("https://mosaic.ows.eu/service/api", min_length=1, description="Base URL of the MOSAIC "
                         "search service (its /search, /full-text and /index-info live under it).")
        search_index: str = Field("simplewiki", min_length=1, description="MOSAIC index to search; 'all' "
                                  "searches every index (one result list per index).")
        limit: int = Field(10, gt=0, le=1000, description="Results asked for per query (per index with 'all').")
        lang: str | None = Field(None, description="Only results in this language (ISO 639-1, e.g. 'en'); null: "
                                 "any.")
        output_column: str = Field("text", min_length=1, description="Column that receives each document's text "
                                   "(mosaicRAG called it full_text).")
        full_text: bool = Field(True, description="Fetch each document's full text; false keeps MOSAIC's "
                                "snippet (one request per query instead of one per result).")
        password_env: str | None = Field(None, min_length=1, json_schema_extra=env_var(), description="Environment "
                                         "variable holding MOSAIC's "
                                         "'pw' for protected indices (kept out of specs and logs).")
        timeout: float = Field(10.0, gt=0, description="Seconds to wait for a connection or an answer, per "
                               "attempt.")
        max_retries: int = Field(2, ge=0, description="Retries after a connection error, a timeout, a 429 or a 5xx.")
        backoff: float = Field(0.5, ge=0, description="Backoff factor in seconds between retries (with jitter).")
        concurrent_requests: int = Field(8, gt=0, description="Full-text requests in flight at once.")
        on_error: Literal["error", "degrade"] = Field("error", description="What a request that still fails does: "
                                                      "'error' fails the step naming the problem; 'degrade' keeps "
                                                      "going (no rows for a failed search, the snippet for a "
                                                      "failed full text) and marks the query degraded.")

        @field_validator("url")
        @classmethod
        def _http_url(cls, url: str) -> str:
            return url_param(url).rstrip("/")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._session = None
        self._password: str | None = None

    def reads(self) -> list[str]:
        return ["qid", "query"]

    def produces(self) -> dict[str, str]:
        return {"docno": "id", **{column: "data" for column in RESULT_FIELDS.values()},
                self.params.output_column: "text", "source_index": "chip", "score": "score", "rank": "rank",
                f"score_{self.step_id}": "score", f"rank_{self.step_id}": "rank"}

    def setup(self) -> None:
        from operators.http import make_session

        p = self.params
        if p.password_env is not None:
            self._password = os.environ.get(p.password_env)
            if not self._password:
                raise OperatorError(f"password_env names ${p.password_env}, which is not set", op=self.name,
                                    step=self.step_id, field="params.password_env")
            remember_secret(self._password)
        self._session = make_session(max_retries=p.max_retries, backoff=p.backoff, pool_size=p.concurrent_requests)

    # -- running ---------------------------------------------------------------------

    def transform(self, table: pa.Table) -> pa.Table:
        if table.num_rows == 0:
            return self._rows(table, [], [])
        _, first = np.unique(table.column("qid").to_numpy(zero_copy_only=False), return_index=True)
        queries = table.take(pa.array(np.sort(first)))
        found: list[list[dict[str, Any]]] = []
        for qid, query in zip(queries.column("qid").to_pylist(), queries.column("query").to_pylist()):
            try:
                found.append(self._search(query or ""))
            except MosaicError as err:
                found.append(self._degrade(str(qid), f"search failed: {err.message}"))
        if self.params.full_text:
            self._fill_full_texts(queries.column("qid").to_pylist(), found)
        return self._rows(queries, found, queries.column_names)

    def _search(self, query: str) -> list[dict[str, Any]]:
        p = self.params
        params: dict[str, Any] = {"q": query, "limit": p.limit}
        if p.search_index != "all":
            params["index"] = p.search_index
        if p.lang:
            params["lang"] = p.lang
        answer = self._get_json("/search", params)
        lists = answer.get("results") if isinstance(answer, dict) else None
        if not isinstance(lists, list) or not all(isinstance(item, dict) for item in lists):
            raise MosaicError(f"GET {p.url}/search answered no 'results' list of {{index: [documents]}}: "
                              f"{_short(answer)}", op=self.name, step=self.step_id)
        docs = []
        for item in lists:
            for index, results in item.items():
                for position, doc in enumerate(results or [], start=1):
                    if not isinstance(doc, dict) or doc.get("id") in (None, ""):
                        raise MosaicError(f"a result of index '{index}' has no id: {_short(doc)}", op=self.name,
                                          step=self.step_id)
                    docs.append({**doc, "_index": index, "_position": position})
        return docs

    def _fill_full_texts(self, qids: list[str], found: list[list[dict[str, Any]]]) -> None:
        ids = list(dict.fromkeys(str(doc["id"]) for docs in found for doc in docs))
        if not ids:
            return
        with ThreadPoolExecutor(max_workers=min(self.params.concurrent_requests, len(ids)),
                                thread_name_prefix=f"mosaic-{self.step_id}") as pool:
            texts = dict(zip(ids, pool.map(self._full_text_or_error, ids)))
        for qid, docs in zip(qids, found):
            failed = [(doc["id"], texts[str(doc["id"])]) for doc in docs if isinstance(texts[str(doc["id"])],
                                                                                      MosaicError)]
            for doc in docs:
                text = texts[str(doc["id"])]
                doc["_text"] = doc.get("textSnippet") if isinstance(text, MosaicError) else text
            if failed:
                first_id, first = failed[0]
                self._degrade(str(qid), f"full text of {len(failed)} of {len(docs)} documents failed (first, "
                              f"{first_id}: {first.message}); their snippet stands in")

    def _full_text_or_error(self, doc_id: str) -> str | MosaicError:
        try:
            response = self._get("/full-text", {"id": doc_id})
        except MosaicError as err:
            return err
        if "json" in response.headers.get("content-type", ""):  # mosaicRAG's services answer {"fullText": ...}
            try:
                return str(response.json().get("fullText", ""))
            except (ValueError, AttributeError):
                return MosaicError(f"full text of {doc_id} is not the JSON it says: {_short(response.text)}")
        if "charset" not in response.headers.get("content-type", ""):  # requests would read it as Latin-1
            return response.content.decode("utf-8", errors="replace")
        return response.text

    def _degrade(self, qid: str, problem: str) -> list:
        self.degrade(qid, problem, keeps="what it has", error=MosaicError)
        return []

    # -- HTTP ------------------------------------------------------------------------

    def _get(self, path: str, params: dict[str, Any]):
        import requests

        from operators.http import cause, status_problem

        self.ensure_setup()
        url = f"{self.params.url}{path}"
        if self._password:
            params = {**params, "pw": self._password}
        try:
            response = self._session.get(url, params=params, timeout=self.params.timeout)
        except requests.RequestException as err:
            raise MosaicError(self._redact(f"GET {url} failed: {cause(err, self._session, url)}")) from None
        if response.status_code >= 400:
            problem = status_problem(response, f"GET {url}")
            if path == "/search" and response.status_code == 404 and self.params.search_index != "all":
                problem = f"index '{self.params.search_index}' not found ({self._known_indices()}); {problem}"
            raise MosaicError(self._redact(problem))
        return response

    def _get_json(self, path: str, params: dict[str, Any]) -> Any:
        response = self._get(path, params)
        try:
            return response.json()
        except ValueError:
            raise MosaicError(f"GET {self.params.url}{path} answered {response.status_code} with a body that is not "
                              f"JSON: {_short(response.text)}") from None

    def _known_indices(self) -> str:
        """What /index-info lists, for an error message (or why it could not be asked)."""
        try:
            info = self._get_json("/index-info", {}).get("results", [])
            names = [f"{name} ({(about or {}).get('documentCount', '?')} documents)"
                     for item in info for name, about in item.items()]
            return "the service has " + (", ".join(names) or "no index")
        except (MosaicError, AttributeError, TypeError) as err:
            return f"/index-info did not say which indices exist: {err}"

    def _redact(self, message: str) -> str:
        return message.replace(self._password, "***") if self._password else message

    # -- output ----------------------------------------------------------------------

    def _rows(self, queries: pa.Table, found: list[list[dict[str, Any]]], query_columns: list[str]) -> pa.Table:
        owned = {"docno", self.params.output_column, "source_index", "score", "rank", *RESULT_FIELDS.values(),
                 f"score_{self.step_id}", f"rank_{self.step_id}"}
        kept = [c for c in query_columns if c not in owned] or ["qid", "query"]
        which = np.repeat(np.arange(len(found), dtype=np.int64), [len(docs) for docs in found])
        docs = [doc for group in found for doc in group]
        columns = {c: (queries.column(c).take(pa.array(which)) if queries.num_rows else pa.array([], pa.string()))
                   for c in kept}
        columns["docno"] = pa.array([str(d["id"]) for d in docs], pa.string())
        for field, column in RESULT_FIELDS.items():
            kind = pa.int64() if field == "wordCount" else pa.string()
            columns[column] = pa.array([_value(d.get(field), kind) for d in docs], kind)
        text = "_text" if self.params.full_text else "textSnippet"
        columns[self.params.output_column] = pa.array([d.get(text) for d in docs], pa.string())
        columns["source_index"] = pa.array([d["_index"] for d in docs], pa.string())
        out = pa.Table.from_pydict(columns)
        scores = pa.array([1.0 / d["_position"] for d in docs], pa.float64())
        return set_ranking(out, scores, self.step_id)


def _value(value: Any, kind: pa.DataType) -> Any:
    if value is None:
        return None
    if kind == pa.int64():
        try:
            return int(value)
        except (TypeError, ValueError):
            return None
    return str(value)


def _short(value: Any) -> str:
    from operators.http import excerpt

    return excerpt(repr(value) if not isinstance(value, str) else value)
