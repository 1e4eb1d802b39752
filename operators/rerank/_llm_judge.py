"""What the LLM rerankers share: a model that picks the most relevant of a few candidates.

``rerank.llm_tournament`` and ``rerank.llm_group`` both show the model a handful of
numbered candidates and read back one number. ``LLMJudgeReranker`` is the reranker
contract (``operators/rerank/base.py``: candidate selection, output, failure policy)
with an LLM (``operators/llm``: model params, prompts, usage, cache rule) as its judge.

The embedded model's reply is held to the choice numbers by llama.cpp's grammar (a JSON
schema in ``response_format``): unconstrained, SmolLM2 wrote "The answer to the question
is:" and ``max_tokens`` cut it before the number. Other models get the plain prompt.

Failure policy, per call and per query: a call that errors, times out or names no
candidate counts as the incoming order (the best-ranked candidate it showed wins);
the query is marked ``degraded`` with how many calls failed or named none. When no call
of a query named a candidate, the query keeps its first-stage ranking (the reranker rule).
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, ClassVar, Literal, Sequence

import numpy as np
import pyarrow as pa
from pydantic import Field

from operators.llm.embedded_model import CONTEXT_TOKENS
from operators.llm.aliases import resolve
from operators.llm.gateway import Completion, LLMError
from operators.llm.step import LLMParams, LLMStep, junk_reason
from operators.rerank.base import FirstStageKept, Reranker, RerankParams
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
    version = "2"  # the embedded model's replies held to the choices (version 1 cached its first-stage fallbacks)
    batch_size: ClassVar[int | None] = 200
    system_prompt = "You judge search results. Reply with the number of the most relevant document and nothing else."
    prompt_template = ("Question: {query}\n\n{documents}\n\nWhich document answers the question best? "
                       "Reply with its number only.")
    prompt_fields = ("query", "documents")
    prompt_required = ("documents",)

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

        The calls run concurrently (the alias's limit), those showing as many candidates together (the embedded
        model's grammar allows their numbers); usage goes to each call's query."""
        picks: list[int | str] = [""] * len(calls)
        by_size: dict[int, list[int]] = defaultdict(list)
        for i, (_, _, shown) in enumerate(calls):
            by_size[len(shown)].append(i)
        held = resolve(self.params.model).embedded  # the grammar is llama.cpp's; other models get the prompt alone
        for size, indices in by_size.items():
            results = self.ask({i: self.render(query=calls[i][1], documents=self._numbered(calls[i][2]))
                                for i in indices}, qids={i: calls[i][0] for i in indices},
                               options={"response_format": choice_format(size)} if held else None)
            for i in indices:
                picks[i] = _pick(results[i], size)
        return picks

    def _numbered(self, texts: Sequence[str]) -> str:
        return "\n\n".join(f"[{i}] {' '.join(text.split())[:self.params.max_chars]}" for i, text in enumerate(texts, 1))

    def settle(self, qid: str, failures: list[str], calls: int) -> Exception | None:
        """Apply the failure policy to a query after its calls: an exception when none of them succeeded."""
        if not failures:
            return None
        unread = sum(isinstance(f, NoCandidate) for f in failures)
        what = ("failed" if not unread else "named no candidate" if unread == len(failures)
                else f"failed or named no candidate ({len(failures) - unread} failed, {unread} replied without one)")
        if len(failures) == calls:
            said = ("every model call failed" if not unread else f"the model replied to all {calls} calls but "
                    "none named a candidate" if unread == calls else f"every model call {what}")
            return FirstStageKept(f"{said}; first: {failures[0]}")
        decided = "" if self.params.on_error == "error" else " (the incoming order decided them)"  # error: it fails
        self.degrade(qid, f"{len(failures)} of {calls} model calls {what}{decided}; first: {failures[0]}")
        return None


class NoCandidate(str):
    """Why a reply that came names no candidate (a plain ``str`` reason is a call that failed)."""


def choice_format(choices: int) -> dict[str, Any]:
    """llama.cpp's ``response_format`` for a reply that is one of the numbers 1..choices (a grammar from the schema)."""
    return {"type": "json_object", "schema": {"type": "integer", "enum": list(range(1, choices + 1))}}


#: A number the reply marks as a candidate's: "[2]", "document 2", "doc #2", "number 2", "answer is 2", "2" alone.
_MARKED = re.compile(r"\[\s*(\d+)\s*\]|\b(?:document|doc|candidate|number|no\.?|is|:)\s*#?\s*(\d+)\b|^\W*(\d+)\W*$",
                     re.IGNORECASE)


def _pick(result: Completion | LLMError, shown: int) -> int | str:
    """The 0-based candidate the reply names, or why there is none: the first number it marks as a candidate's
    (``_MARKED``: "Of the 2 documents, [1] answers it" is 1), else its first number within 1..shown."""
    problem = junk_reason(result)
    if problem:
        return problem
    marked = [int(next(g for g in m.groups() if g)) for m in _MARKED.finditer(result.text.strip())]
    for number in marked + [int(n) for n in re.findall(r"\d+", result.text)]:
        if 1 <= number <= shown:
            return number - 1
    cut = " (cut at max_tokens)" if result.finish_reason == "length" else ""
    return NoCandidate(f"the reply names no candidate 1..{shown}{cut}: {result.text[:60]!r}")


def position_scores(merit: np.ndarray) -> np.ndarray:
    """Scores that order by ``merit`` (higher first), ties by incoming position: merit less position / n."""
    n = len(merit)
    return merit.astype(np.float64) - np.arange(n, dtype=np.float64) / max(n, 1)
