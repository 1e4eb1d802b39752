"""What every reranker shares: candidate selection, the failure policy, the output.

This is the reranker contract, public on purpose: Serve's reranker deployment and the
placement proxy build on ``Reranker``, ``RerankParams`` and ``sendable_texts``.

A reranker is a query-scope step. For each query it takes the top ``n`` rows by the
incoming ``rank`` (all rows when ``n`` is unset), asks the subclass for one score per
(query, candidate text) with ``score_texts``, and writes ``score``/``rank`` plus its
own ``score_<step>``/``rank_<step>``. Rows below the top ``n`` keep their previous
order beneath the reranked ones; their ``score_<step>`` is null and their ``score``
is placed below the lowest reranked score, so ``score`` and ``rank`` always agree.

Failure policy, the same for every reranker (``on_error``):

* ``first_stage`` (default): a query whose scoring fails keeps its incoming ranking
  (``score``/``rank`` unchanged, ``score_<step>`` null, ``rank_<step>`` = the
  incoming rank), is marked ``degraded`` in the flow result's per-query metadata
  with the reason, and the failure is logged.
* ``error``: the step fails with the reason.

Either way a reranker never returns fewer rows than it received. Why this is not
left to each operator: Open WebUI, RAGFlow and Dify each shipped rerankers whose
failures returned silently empty or silently unchanged results.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator
from operators.errors import FlowCancelled
from operators.tables import concat, document_text, empty_like, qid_groups, ranking_columns, set_column, set_ranking

log = logging.getLogger(__name__)


class TitledTexts(list):
    """Candidate texts (title, newline, text; the text alone without a title) that keep both parts apart too."""

    def __init__(self, titles: Sequence[str | None], bodies: Sequence[str]) -> None:
        super().__init__(document_text(body, title) for title, body in zip(titles, bodies))
        self.titles = [title or "" for title in titles]
        self.bodies = list(bodies)


def sendable_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list for a Serve call; a ``TitledTexts`` goes whole, since ``long_texts: max_window``
    repeats each title in every window and needs it kept apart."""
    return texts if isinstance(texts, TitledTexts) else list(texts)


class RerankParams(BaseModel):
    """Parameters every reranker takes."""

    model_config = ConfigDict(extra="forbid")

    n: int | None = Field(100, gt=0, description="Rerank the top n candidates of each query (by incoming rank); "
                          "null reranks all of them. Rows below n keep their order beneath the reranked ones.")
    query: str | None = Field(None, description="Score every candidate against this text instead of the flow's "
                              "query (mosaicRAG's per-step query).")
    text_column: str = Field("text", description="Column holding the candidate text.")
    title_column: str | None = Field("title", description="Column prepended to the text (with a newline) when "
                                     "present and non-empty; null to score the text alone.")
    on_error: Literal["first_stage", "error"] = Field(
        "first_stage", description="When scoring a query fails: 'first_stage' keeps the incoming ranking and marks "
        "the query degraded (with the reason, in the result metadata and the log); 'error' fails the step.")


class Reranker(Operator):
    """Base of the rerankers (not registered: it has no name); subclasses implement ``score_texts``."""

    scope: ClassVar[str] = "query"
    #: About ten queries of 100 candidates a batch: executors report progress (and check for
    #: cancellation) between batches, and a model pass over a whole benchmark takes minutes.
    batch_size: ClassVar[int | None] = 1000
    Params: ClassVar[type[BaseModel]] = RerankParams

    # -- what a subclass gives -------------------------------------------------

    # A subclass implements one of the two; each defaults to the other.

    def score_texts(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One relevance score per text (higher is better)."""
        if type(self).score_queries is Reranker.score_queries:
            raise NotImplementedError(f"{type(self).__name__} must implement score_texts or score_queries")
        result = self.score_queries([query], [texts])[0]
        if isinstance(result, Exception):
            raise result
        return result

    def score_queries(self, queries: Sequence[str], texts: Sequence[Sequence[str]]) -> list[np.ndarray | Exception]:
        """Scores for several queries at once; one entry per query, an exception where it failed.

        The default scores one query at a time, so a failure is confined to its query;
        a subclass that batches across queries (an embedding model) may override it.
        """
        if type(self).score_texts is Reranker.score_texts:
            raise NotImplementedError(f"{type(self).__name__} must implement score_texts or score_queries")
        results: list[np.ndarray | Exception] = []
        for query, candidates in zip(queries, texts):
            try:
                results.append(self.score_texts(query, candidates))
            except FlowCancelled:
                raise
            except Exception as err:  # noqa: BLE001  (the failure policy decides)
                results.append(err)
        return results

    # -- the contract ------------------------------------------------------------

    def reads(self) -> list[str]:
        columns = ["qid", "docno", "rank", self.params.text_column]
        return columns if self.params.query is not None else ["query", *columns]

    def produces(self) -> dict[str, str]:
        return ranking_columns(self.step_id)

    def candidate_texts(self, rows: pa.Table) -> TitledTexts:
        texts = [t or "" for t in rows.column(self.params.text_column).to_pylist()]
        title = self.params.title_column
        titles = rows.column(title).to_pylist() if title and title in rows.column_names else [None] * len(texts)
        return TitledTexts(titles, texts)

    def transform(self, table: pa.Table) -> pa.Table:
        if table.num_rows == 0:
            return set_ranking(empty_like(table), [], self.step_id)
        groups = [(qid, rows.take(pc.sort_indices(rows, [("rank", "ascending")]))) for qid, rows in qid_groups(table)]
        heads = [rows.slice(0, self.params.n) if self.params.n else rows for _, rows in groups]
        queries = [self.params.query if self.params.query is not None else str(head.column("query")[0])
                   for head in heads]
        scored = self.score_queries(queries, [self.candidate_texts(head) for head in heads])
        out = []
        for (qid, rows), head, scores in zip(groups, heads, scored):
            problem = _problem(scores, head.num_rows)
            if problem is not None:
                out.append(self._keep_first_stage(qid, rows, problem,
                                                  cause=scores if isinstance(scores, Exception) else None))
            else:
                out.append(_reranked(rows, np.asarray(scores, dtype=np.float64), head.num_rows, self.step_id))
        return concat(out)

    def _keep_first_stage(self, qid: str, rows: pa.Table, problem: str,
                          cause: BaseException | None = None) -> pa.Table:
        self.degrade(qid, problem, keeps="its first-stage ranking", cause=cause)
        rows = set_column(rows, f"score_{self.step_id}", pa.nulls(rows.num_rows, pa.float64()))
        return set_column(rows, f"rank_{self.step_id}", rows.column("rank").cast(pa.int32()))


class FirstStageKept(Exception):
    """A reranker's own reason to keep a query's first-stage ranking, said as it is: no exception class in front
    (an LLM judge whose replies named no candidate is no ``RuntimeError``)."""


def _problem(scores: Any, expected: int) -> str | None:
    """Why ``scores`` cannot be used as a ranking of ``expected`` candidates (None if it can)."""
    if isinstance(scores, FirstStageKept):
        return str(scores)
    if isinstance(scores, Exception):
        return f"{type(scores).__name__}: {scores}"
    values = np.asarray(scores, dtype=np.float64).reshape(-1)
    if values.shape[0] != expected:
        return f"the scorer returned {values.shape[0]} scores for {expected} candidates"
    if not np.all(np.isfinite(values)):
        return "the scorer returned non-finite scores"
    return None


def _reranked(rows: pa.Table, scores: np.ndarray, n_head: int, step_id: str) -> pa.Table:
    """``rows`` (sorted by incoming rank) with the head ranked by ``scores`` and the tail below it.

    Equal scores keep their incoming order (a stable sort): candidates a scorer cannot tell apart (TF-IDF's zeros
    for no shared term, two copies of a text) stay as the first stage ranked them, not in docno order. The tail
    keeps its incoming order under scores below every reranked one; its own ``score_<step>`` is null, since this
    step did not score it."""
    tail = rows.num_rows - n_head
    floor = scores.min() if n_head else 0.0
    ranked = np.concatenate([scores, floor - 1.0 - np.arange(tail, dtype=np.float64)])
    own = pa.array(np.concatenate([scores, np.full(tail, np.nan)]), pa.float64(),
                   mask=np.r_[np.zeros(n_head, bool), np.ones(tail, bool)])
    order = np.argsort(-ranked, kind="stable")
    return set_ranking(rows.take(order), ranked[order], step_id, step_scores=own.take(order),
                       groups=np.zeros(rows.num_rows, np.int64), ordered=True)
