"""What the model deployments share: the hosted operator, batching settings, call statistics, and
answering each request of a batch on its own.

A deployment hosts the same operator class a flow step runs in-process (built from
the registry with the same params), so a model answers identically wherever it runs.

Readiness: the constructor loads the model and runs one forward pass (``warm_up``), so
Serve marks a replica RUNNING only when it can answer at full speed; the ingress reads
that state for ``/v1/models`` and ``/healthz`` (serve/health.py).

Batches: ``@serve.batch`` merges other clients' requests into one model call. When that
call fails, each request is run alone (``answer_each``), so one bad input fails only its
own request, never its batch neighbours.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from typing import Any, Awaitable, Callable, Sequence, TypeVar

from operators.registry import create

log = logging.getLogger("ray.serve")
R = TypeVar("R")


#: Texts of one request a model deployment encodes or scores at once before it turns to what other clients sent
#: meanwhile (``embed``, ``score``), at least: a request of 2,048 long texts held the replica for minutes while
#: another key's one-word request waited behind it. A part is never less than one forward pass (``part_size``).
FAIR_SHARE = 64


class HostedOperator:
    """Plain base of the model deployments (the subclasses carry ``@serve.deployment``)."""

    kind = ""

    def __init__(self, name: str, op: str, params: dict[str, Any]) -> None:
        self.name = name
        self.op = create(op, params, step_id=name)
        self.op.ensure_setup()  # once per replica: the model stays loaded between requests
        self.identity = self.op.cache_identity()
        self.model_calls = 0
        self.items_served = 0
        self.batch_sizes: deque[int] = deque(maxlen=1000)
        self.batching: dict[str, Any] = {}  # the settings reconfigure applied (else the decorator's defaults)
        log.info("%s: %s loaded in replica pid %s", name, self.op, os.getpid())

    def warm_up(self) -> None:
        """One forward pass on a tiny input (lazy kernels, allocators), so a RUNNING replica answers at speed.

        Subclasses call it at the end of their constructor; if it fails the replica does not start."""
        raise NotImplementedError

    def answer_each(self, run: Callable[[list[R]], list[Any]], requests: Sequence[R]) -> list[Any]:
        """``run(requests)``: one answer (or exception) per request. If the batched call raises, each
        request runs alone, so the failure lands on the requests that cause it and no other."""
        try:
            return run(list(requests))
        except Exception as err:  # noqa: BLE001  (isolated below)
            if len(requests) == 1:
                return [err]
            log.warning("%s: a batch of %d requests failed (%s: %s); answering each alone", self.name, len(requests),
                        type(err).__name__, err)
        answers: list[Any] = []
        for request in requests:
            try:
                answers.extend(run([request]))
            except Exception as err:  # noqa: BLE001  (this request's own failure, raised to its caller)
                answers.append(err)
        return answers

    def reconfigure(self, config: dict[str, Any]) -> None:
        """Apply ``user_config`` (the batching settings); Serve calls it on start and on every change."""
        batcher = self.batcher()
        if "max_batch_size" in config:
            batcher.set_max_batch_size(int(config["max_batch_size"]))
            self.batching["max_batch_size"] = int(config["max_batch_size"])
        if "batch_wait_timeout_s" in config:
            batcher.set_batch_wait_timeout_s(float(config["batch_wait_timeout_s"]))
            self.batching["batch_wait_timeout_s"] = float(config["batch_wait_timeout_s"])

    def batcher(self) -> Any:
        """The ``@serve.batch`` method whose settings ``reconfigure`` changes."""
        raise NotImplementedError

    def part_size(self) -> int:
        """Texts of one request sent to the model at once (``FAIR_SHARE``), but never less than the model's forward
        pass (a GPU's 128, a static model's 1,024, a batch size the params set): smaller parts would slow it."""
        from operators.models.batching import forward_batch_size

        params, model = self.op.params, getattr(self.op, "model", None) or getattr(self.op, "_model", None)
        asked = getattr(params, "encode_batch_size", None) or getattr(params, "predict_batch_size", None)
        return max(FAIR_SHARE, forward_batch_size(asked, model) if model is not None else 0)

    async def in_parts(self, call: Callable[[Any], Awaitable[Any]], texts: Sequence[Any],
                       cut: Callable[[Sequence[Any], int, int], Any] = lambda texts, start, stop: texts[start:stop]
                       ) -> list[Any]:
        """``call`` (a ``@serve.batch`` method) on ``texts`` ``part_size()`` at a time, each part queued behind what
        other clients sent meanwhile: the parts' answers in order, a part's exception raised. ``cut``: a part of
        ``texts`` (one that keeps more than the texts, such as a reranker's titles)."""
        size, parts = self.part_size(), []
        for start in range(0, max(len(texts), 1), size):
            result = await call(cut(texts, start, start + size))
            if isinstance(result, Exception):
                raise result
            parts.append(result)
        return parts

    def record_batch(self, size: int) -> None:
        self.model_calls += 1
        self.items_served += size
        self.batch_sizes.append(size)
        log.debug("%s: one model call for a batch of %d requests", self.name, size)

    def info(self) -> dict[str, Any]:
        """What this replica hosts, and how its requests were batched (for /v1/models, placement, tests)."""
        return {
            "name": self.name, "kind": self.kind, "op": self.op.name,
            "params": self.op.params.model_dump(mode="json"), "identity": self.identity,
            "model_calls": self.model_calls, "requests": self.items_served, "batch_sizes": list(self.batch_sizes),
            **self.batching,
            "pid": os.getpid(), "gpu_ids": _gpu_ids(), "max_tokens": self.reads_tokens(),
        }

    def reads_tokens(self) -> int | None:
        """The tokens the model reads of a text before it cuts the rest (None: unknown): a request that asks to cut
        shorter (Cohere's ``max_tokens``, ``max_tokens_per_doc``) is refused by the ingress, not ignored."""
        if getattr(self.op.params, "long_texts", "truncate") != "truncate":  # a cross-encoder's max_window reads on
            return None
        model = getattr(self.op, "model", None)
        tokenizer = getattr(model, "tokenizer", None)
        config = getattr(model, "config", None)
        # ColBERT's documents (its params', else its checkpoint's length), else a transformer's input
        limit = getattr(self.op.params, "doc_maxlen", None) or getattr(config, "doc_maxlen", None) \
            or getattr(model, "max_seq_length", None) or getattr(tokenizer, "model_max_length", None)
        return int(limit) if isinstance(limit, int) and limit < 10**6 else None  # (a tokenizer's "no limit": 1e30)


def _gpu_ids() -> list:
    """The GPUs Ray gave this replica (``num_gpus`` in its ``ray_actor_options``); [] on CPU or outside Ray."""
    import ray

    return [str(gpu) for gpu in ray.get_gpu_ids()] if ray.is_initialized() else []
