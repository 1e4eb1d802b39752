"""rerank.llm_group: every group of ``window_size`` candidates judged by a language model, points to the winners."""

from __future__ import annotations

import logging
from itertools import combinations
from math import comb
from typing import Any, ClassVar, Sequence

import numpy as np
from pydantic import Field

from operators.errors import ParamsError
from operators.rerank._llm_judge import JudgeParams, LLMJudgeReranker, position_scores

log = logging.getLogger(__name__)


class GroupParams(JudgeParams):
    window_size: int = Field(2, ge=2, description="Candidates shown together in one call; every combination of "
                             "this many of the top n is judged once (C(n, window_size) calls per query).")
    max_calls: int = Field(200, gt=0, description="Most calls one query may cost; a step whose n and window_size "
                           "(or a query with more candidates, when n is null) would cost more is refused.")


class LLMGroupReranker(LLMJudgeReranker):
    """Rerank by points: the model picks the best of every group of ``window_size`` candidates.

    Each of the C(n, window_size) combinations of a query's top n candidates is one call;
    its winner gets a point and candidates go by points, ties by incoming rank (``score``:
    the points less a fraction for the incoming rank). The cost is logged (a note) before the calls
    and refused above ``max_calls`` (mosaicRAG's group reranker). A failed call gives its
    point to the group's best-ranked candidate.

    Usage::

        op = LLMGroupReranker({"model": "local", "n": 6, "window_size": 3}, step_id="groups")
        out = op(hits)   # 20 calls per query
    """

    name = "rerank.llm_group"
    aliases = ("llm_group", "GroupRerankerStep")
    Params: ClassVar[type[GroupParams]] = GroupParams

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.params.n is not None:
            if self.params.window_size > self.params.n:  # a query's groups shrink to its candidates: one group
                raise ParamsError(f"window_size {self.params.window_size} is more than n {self.params.n}: the one "
                                  "group would hold every candidate (one call that picks the best, the rest left in "
                                  "their order); give a window_size of n or less", op=self.name, step=self.step_id,
                                  field="params.window_size")
            self._check_cost(self.params.n)

    def _check_cost(self, candidates: int) -> int:
        calls = comb(candidates, self.params.window_size) if candidates > 1 else 0
        if calls > self.params.max_calls:
            raise ParamsError(f"{candidates} candidates in groups of {self.params.window_size} cost {calls} calls "
                              f"per query, above max_calls {self.params.max_calls}: lower n or window_size, or "
                              "raise max_calls", op=self.name, step=self.step_id, field="params.max_calls")
        return calls

    def rank_queries(self, work: list[tuple[str, str, Sequence[str]]]) -> list[np.ndarray | Exception]:
        groups = []   # (query index, candidate positions shown)
        for q, (_, _, texts) in enumerate(work):
            self._check_cost(len(texts))
            size = min(self.params.window_size, len(texts))
            groups += [(q, shown) for shown in combinations(range(len(texts)), size)] if size > 1 else []
        # the cost before it is spent: a note, not a warning (every run said "warning:"); the command line prints
        # it as "tessera: ..." (flows/commands/_log_lines.py), a Ray worker's log too
        if groups:  # (none: a query of one candidate has nothing to compare, and nothing is said)
            log.warning("%s [%s]: %d model call%s for %d quer%s, starting", self.name, self.step_id, len(groups),
                        "" if len(groups) == 1 else "s", len(work), "y" if len(work) == 1 else "ies",
                        extra={"note": True})
        picks = self.judge([(work[q][0], work[q][1], [work[q][2][i] for i in shown]) for q, shown in groups])
        points = [np.zeros(len(texts)) for _, _, texts in work]
        failures: list[list[str]] = [[] for _ in work]
        calls = [0] * len(work)
        for (q, shown), pick in zip(groups, picks):
            calls[q] += 1
            if isinstance(pick, str):
                failures[q].append(pick)
                pick = 0   # the incoming order decides: the group's best-ranked candidate
            points[q][shown[pick]] += 1
        results: list[np.ndarray | Exception] = []
        for q, (qid, _, _) in enumerate(work):
            problem = self.settle(qid, failures[q], calls[q])
            results.append(problem if problem is not None else position_scores(points[q]))
        return results
