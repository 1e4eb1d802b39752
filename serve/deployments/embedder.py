"""The embedder deployment: ``embed.sentence_transformer`` behind Serve, requests batched into one encode."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
from ray import serve

from serve.deployments._hosted import HostedOperator


@serve.deployment(name="embedder")
class EmbedderDeployment(HostedOperator):
    """Encodes texts with the hosted SentenceTransformerEmbedder.

    Concurrent ``embed`` calls are merged by ``@serve.batch`` into one ``encode`` over
    all their texts (one forward pass per ``encode_batch_size`` texts), then split back;
    a request whose texts fail the encode fails alone.
    """

    kind = "embedding"

    def __init__(self, name: str, op: str, params: dict[str, Any]) -> None:
        super().__init__(name, op, params)
        from operators.models import load_sentence_transformer

        p = self.op.params  # the same shared model object the operator loaded
        self.model = load_sentence_transformer(p.model, device=p.device, backend=p.backend)
        self.dimension = self.op.dimension
        self.warm_up()

    def warm_up(self) -> None:
        self._encode(["warm-up"])

    def batcher(self) -> Any:
        return self._embed_batch

    async def embed(self, texts: list[str]) -> dict[str, Any]:
        """``{"vectors": float32 (n, dim), "tokens": int}`` for ``texts`` (tokens after truncation), encoded
        ``part_size()`` texts at a time, each part queued behind what other clients sent meanwhile."""
        parts = await self.in_parts(self._embed_batch, list(texts))
        if len(parts) == 1:
            return parts[0]
        return {"vectors": np.concatenate([part["vectors"] for part in parts]),
                "tokens": sum(part["tokens"] for part in parts)}

    @serve.batch(max_batch_size=16, batch_wait_timeout_s=0.005)
    async def _embed_batch(self, requests: list[list[str]]) -> list[dict[str, Any] | Exception]:
        self.record_batch(len(requests))
        return await asyncio.to_thread(self.answer_each, self._embed_all, requests)

    def _embed_all(self, requests: list[list[str]]) -> list[dict[str, Any]]:
        """One encode over every request's texts, split back per request."""
        vectors, tokens = self._encode([text for texts in requests for text in texts])
        out, start = [], 0
        for texts in requests:
            end = start + len(texts)
            out.append({"vectors": vectors[start:end], "tokens": int(tokens[start:end].sum())})
            start = end
        return out

    def _encode(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        vectors = self.op.encode(texts)
        return vectors, self.token_counts(texts)

    def token_counts(self, texts: list[str]) -> np.ndarray:
        """Tokens the model reads per text (after its truncation), for the OpenAI ``usage`` field."""
        if not texts:
            return np.zeros(0, dtype=np.int64)
        encoded = self.model.tokenizer(texts, truncation=True, max_length=self.model.max_seq_length)
        return np.array([len(ids) for ids in encoded["input_ids"]], dtype=np.int64)

    def reads_tokens(self) -> int | None:
        return int(self.model.max_seq_length) if self.model.max_seq_length else None

    def info(self) -> dict[str, Any]:
        return {**super().info(), "dimension": self.dimension, "device": str(self.model.device)}
