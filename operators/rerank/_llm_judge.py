"""What the LLM rerankers share: a model that picks the most relevant of a few candidates.

``rerank.llm_tournament`` and ``rerank.llm_group`` both show the model a handful of
numbered candidates and read back one number. ``LLMJudgeReranker`` is the reranker
contract (``operators/rerank/base.py``: candidate selection, output, failure policy)
with an LLM (``operators/llm``: model params, prompts, usage, cache rule) as its judge.

Failure policy, per call and per query: a call that errors, times out or names no
candidate counts as the incoming order (the best-ranked candidate it showed wins);
the query is marked ``degraded`` with how many calls failed. When every call of a
query failed, the query keeps its first-stage ranking (the reranker rule).
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal, Sequence

import numpy as np
import pyarrow as pa
from pydantic import Field

from operators.llm.embedded import CONTEXT_TOKENS
from operators.llm.gateway import Completion, LLMError
from operators.llm.step import LLMParams, LLMStep, junk_reason
from operators.rerank.base import Reranker, RerankParams
from operators.tables import qid_groups


class JudgeParams(RerankParams, LLMParams):
    """A reranker's params and an LLM step's params together."""

    n: int | None = Field(10, gt=0, description="Rerank the top n candidates of each query (by incoming rank); "
                          "null reranks all of them. Rows below n keep their order beneath the reranked ones.")
    max_chars: int = Field(600, gt=0, description="Each candidate is cut to this many characters in the prompt "
                           f"(the embedded model reads {CONTEXT_TOKENS:,} tokens in all).")
    max_tokens: int = Field(8, gt=0, le=32768, description="Most tokens the model may write per call (the reply "
                            "is one number).")
    on_error: Literal["first_stage", "error"] = Field(
        "first_stage", description="When a call fails or names no candidate: 'first_stage' lets the incoming order "
        "decide that call (a query whose calls all failed keeps its incoming ranking) and marks the query "
        "degraded with the reason; 'error' fails the step.")


class LLMJudgeReranker(Reranker, LLMStep):
    """Base of the LLM rerankers (not registered: it has no name); subclasses rank by ``judge`` calls."""

    Params: ClassVar[type[JudgeParams]] = JudgeParams
    batch_size: ClassVar[int | None] = 200
    system_prompt = "You judge search results. Reply with the number of the most relevant document and nothing else."
    prompt_template = ("Question: {query}\n\n{documents}\n\nWhich document answers the question best? "
                       "Reply with its number only.")
    prompt_fields = ("query", "documents")

    def transform(self, table: pa.Table) -> pa.Table:
        # score_queries sees queries in qid_groups order (Reranker.transform); keep their qids for usage and metadata.
        self._qids = [qid for qid, _ in qid_groups(table)]
        return super().transform(table)

    def score_queries(self, queries: Sequence[str], texts: Sequence[Sequence[str]]) -> list[np.ndarray | Exception]:
        return self.rank_queries(list(zip(self._qids, queries, texts)))

    def rank_queries(self, work: list[tuple[str, str, Sequence[str]]]) -> list[np.ndarray | Exception]:
        raise NotImplementedError

    def judge(self, calls: list[tuple[str, str, Sequence[str]]]) -> list[int | str]:
        """For each (qid, query, candidate texts): the index of the candidate the model picked, or why none.

        All calls run concurrently (the alias's limit); usage goes to each call's query."""
        results = self.ask({i: self.render(query=query, documents=self._numbered(shown))
                            for i, (_, query, shown) in enumerate(calls)},
                           qids={i: qid for i, (qid, _, _) in enumerate(calls)})
        return [_pick(results[i], len(shown)) for i, (_, _, shown) in enumerate(calls)]

    def _numbered(self, texts: Sequence[str]) -> str:
        return "\n\n".join(f"[{i}] {' '.join(text.split())[:self.params.max_chars]}" for i, text in enumerate(texts, 1))

    def settle(self, qid: str, failures: list[str], calls: int) -> Exception | None:
        """Apply the failure policy to a query after its calls: an exception when none of them succeeded."""
        if not failures:
            return None
        reason = (f"{len(failures)} of {calls} model calls failed (the incoming order decided them); "
                  f"first: {failures[0]}")
        if len(failures) == calls:
            return RuntimeError(f"every model call failed; first: {failures[0]}")
        self.degrade(qid, reason)
        return None


def _pick(result: Completion | LLMError, shown: int) -> int | str:
    """The 0-based candidate the reply names (its first number within 1..shown), or why there is none."""
    problem = junk_reason(result)
    if problem:
        return problem
    for number in re.findall(r"\d+", result.text):
        if 1 <= int(number) <= shown:
            return int(number) - 1
    return f"the reply names no candidate 1..{shown}: {result.text[:60]!r}"


def position_scores(merit: np.ndarray) -> np.ndarray:
    """Scores that order by ``merit`` (higher first), ties by incoming position: merit less position / n."""
    n = len(merit)
    return merit.astype(np.float64) - np.arange(n, dtype=np.float64) / max(n, 1)
