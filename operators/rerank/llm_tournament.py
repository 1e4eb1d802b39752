"""rerank.llm_tournament: single elimination along the incoming ranking, a language model as the judge."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from operators.rerank._llm_judge import LLMJudgeReranker, position_scores


class LLMTournamentReranker(LLMJudgeReranker):
    """Rerank by a single-elimination tournament: the model picks the more relevant of two documents.

    Along the incoming ranking: 1 vs 2, 3 vs 4, ...; then the winners in the same order
    (the winner of 1-2 vs the winner of 3-4), until one is left; an odd one out moves up
    a round unplayed. Candidates end ordered by the round they lost in (the winner first),
    ties by incoming rank; ``score`` is that round less a fraction for the incoming rank.
    n candidates cost n - 1 calls per query, the queries of a batch played side by side
    (mosaicRAG's tournament reranker). A failed call goes to the better-ranked of the two.

    Usage::

        op = LLMTournamentReranker({"model": "local", "n": 8}, step_id="judge")
        out = op(hits)   # qid, query, docno, rank, text -> score, rank, score_judge, rank_judge
    """

    name = "rerank.llm_tournament"
    aliases = ("llm_tournament", "TournamentRerankerStep")

    def rank_queries(self, work: list[tuple[str, str, Sequence[str]]]) -> list[np.ndarray | Exception]:
        alive = [list(range(len(texts))) for _, _, texts in work]   # candidate positions still in, in order
        lost_in = [np.zeros(len(texts)) for _, _, texts in work]     # the round each candidate lost in
        failures: list[list[str]] = [[] for _ in work]
        calls = [0] * len(work)
        round_no = 1
        while any(len(players) > 1 for players in alive):
            matches = [(q, players[i], players[i + 1]) for q, players in enumerate(alive)
                       for i in range(0, len(players) - 1, 2)]
            picks = self.judge([(work[q][0], work[q][1], [work[q][2][a], work[q][2][b]]) for q, a, b in matches])
            losers = set()
            for (q, a, b), pick in zip(matches, picks):
                calls[q] += 1
                if isinstance(pick, str):
                    failures[q].append(pick)
                    pick = 0  # the incoming order decides: a is ranked above b
                loser = b if pick == 0 else a
                lost_in[q][loser] = round_no
                losers.add((q, loser))
            alive = [[p for p in players if (q, p) not in losers] for q, players in enumerate(alive)]
            round_no += 1
        results: list[np.ndarray | Exception] = []
        for q, (qid, _, _) in enumerate(work):
            for champion in alive[q]:
                lost_in[q][champion] = round_no
            problem = self.settle(qid, failures[q], calls[q])
            results.append(problem if problem is not None else position_scores(lost_in[q]))
        return results
