"""The reranker deployment: any registered reranker operator behind Serve, requests batched.

Generic over rerankers (``rerank.cross_encoder``, ``rerank.colbert``, ...): all of them
expose ``score_queries(queries, texts)`` (and ``score_texts``), so a new reranker is one
more entry in serve/config.yaml.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

import numpy as np
from ray import serve

from operators.rerank.base import TitledTexts, sendable_texts
from serve.deployments._hosted import HostedOperator


@serve.deployment(name="reranker")
class RerankerDeployment(HostedOperator):
    """Scores (query, candidate texts) with the hosted reranker operator.

    Concurrent ``score`` calls are merged by ``@serve.batch`` into one
    ``score_queries`` call of the operator; a query that fails raises for its caller
    only.
    """

    kind = "rerank"

    def __init__(self, name: str, op: str, params: dict[str, Any]) -> None:
        super().__init__(name, op, params)
        self.warm_up()

    def warm_up(self) -> None:
        (answer,) = self._score_all([("warm-up", ["warm-up"])])
        if isinstance(answer, Exception):
            raise answer

    def batcher(self) -> Any:
        return self._score_batch

    async def score(self, query: str, texts: list[str]) -> dict[str, Any]:
        """``{"scores": float64 (n,), "tokens": int | None}``: one score per text, higher is better; ``part_size()``
        texts at a time, each part queued behind what other clients sent meanwhile (as the embedder does)."""
        parts = await self.in_parts(lambda part: self._score_batch(str(query), part), sendable_texts(texts), _part)
        if len(parts) == 1:
            return parts[0]
        tokens = [part["tokens"] for part in parts]
        return {"scores": np.concatenate([part["scores"] for part in parts]),
                "tokens": None if None in tokens else sum(tokens)}

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.005)
    async def _score_batch(self, queries: list[str], texts: list[list[str]]) -> list[dict[str, Any] | Exception]:
        self.record_batch(len(queries))
        return await asyncio.to_thread(self.answer_each, self._score_all, list(zip(queries, texts)))

    def _score_all(self, requests: list[tuple[str, list[str]]]) -> list[dict[str, Any] | Exception]:
        """One ``score_queries`` call for every request's (query, texts); a query that fails is its exception."""
        queries, texts = [query for query, _ in requests], [candidates for _, candidates in requests]
        results = self.op.score_queries(queries, texts)
        if len(results) > 1 and isinstance(results[0], Exception) and all(r is results[0] for r in results):
            raise results[0]  # one failure handed to every query (ColBERT encodes them together): isolate it
        out: list[dict[str, Any] | Exception] = []
        for query, candidates, scores in zip(queries, texts, results):
            if isinstance(scores, Exception):
                out.append(scores)
            else:
                out.append({"scores": np.asarray(scores, dtype=np.float64).reshape(-1),
                            "tokens": self.pair_tokens(query, candidates)})
        return out

    def pair_tokens(self, query: str, texts: Sequence[str]) -> int | None:
        """Tokens the model reads for the (query, text) pairs, when the operator's model has a tokenizer."""
        model = getattr(self.op, "model", None)
        tokenizer = getattr(model, "tokenizer", None)
        if tokenizer is None or not callable(tokenizer):
            return None
        if not texts:
            return 0
        limit = getattr(model, "max_seq_length", None) or getattr(tokenizer, "model_max_length", None)
        encoded = tokenizer([query] * len(texts), list(texts), truncation=True, max_length=limit)
        return int(sum(len(ids) for ids in encoded["input_ids"]))


def _part(texts: list[str], start: int, stop: int) -> list[str]:
    """``texts[start:stop]``, a ``TitledTexts`` with its titles (a slice of one is a plain list of joined texts)."""
    if isinstance(texts, TitledTexts):
        return TitledTexts(texts.titles[start:stop], texts.bodies[start:stop])
    return texts[start:stop]
