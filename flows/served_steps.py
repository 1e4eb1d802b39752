"""The proxies a placed step runs as (``ServedReranker``, ``ServedEmbedder``, ``ServedLLMStep``: the step's own
class with its model calls sent to a Serve deployment) and how a call to a deployment goes: sent again after a lost
replica or a shed request (``retrying``, ``answer``, ``replica_lost``), given ``$TESSERA_PLACEMENT_TIMEOUT_S``
(``call_timeout_s``), and a cancel told from a failure (``cancelled_by_serve``). Apart from ``flows.placement``
(which step may be placed where, and the checks before a placed step runs), which re-exports these names."""

from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from operators.embed.sentence_transformer import SentenceTransformerEmbedder
from operators.env_numbers import env_seconds
from operators.errors import FlowCancelled, OperatorError
from operators.interrupt import checkpoint, each_concurrently
from operators.llm.aliases import resolve
from operators.llm.chat_reply import ChatReply
from operators.llm.gateway import DEFAULT_RETRIES, DEFAULT_TIMEOUT, Completion, LLMError, Prompt, messages_of
from operators.llm.step import LLMStep
from operators.rerank.base import Reranker, sendable_texts

#: Seconds a call to a deployment may take (``$TESSERA_PLACEMENT_TIMEOUT_S``, read at each call).
TIMEOUT_S = 600.0
EMBED_CHUNK = 256  # texts per embed request, sent concurrently so the deployment batches them


def retrying(retries: int = DEFAULT_RETRIES) -> Any:
    """tenacity's attempts at a deployment call: again after a lost replica or a shed request, with backoff."""
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

    return Retrying(stop=stop_after_attempt(retries + 1), wait=wait_exponential(0.5, max=8),
                    retry=retry_if_exception(replica_lost), reraise=True)


def answer(send: Callable[[], Any], response: Any) -> Any:
    """The result of ``response`` (what ``send()`` returned), sent again after a lost replica (``retrying``)."""
    for attempt in retrying():
        with attempt:
            if attempt.retry_state.attempt_number > 1:
                response = send()
            return response.result(timeout_s=call_timeout_s())


def call_timeout_s(environ: Mapping[str, str] | None = None) -> float:
    """``$TESSERA_PLACEMENT_TIMEOUT_S`` (more than 0), else ``TIMEOUT_S``; ``environ`` for ``tessera serve``'s check
    of the settings it carries to the replicas."""
    return env_seconds("TESSERA_PLACEMENT_TIMEOUT_S", TIMEOUT_S, zero=False, environ=environ)

class _Served:
    """What both proxies share: the handle, the deployment's identity, no local model."""

    _handle: Any = None
    _info: dict[str, Any] = {}
    _where = ""

    def attach(self, handle: Any, info: dict[str, Any], where: str) -> None:
        self._handle, self._info, self._where = handle, info, where

    def setup(self) -> None:
        """Nothing loads here: the model lives in the deployment."""

    def cache_identity(self) -> dict[str, Any]:
        """The step's params plus what the deployment adds (its weights' fingerprint): the in-process identity."""
        served = {k: v for k, v in self._info.get("identity", {}).items() if k not in self._info.get("params", {})}
        return {**self.params.model_dump(mode="json"), **served}


class ServedReranker(_Served, Reranker):
    """Reranker proxy: scores come from the deployment, one request per query (batched there)."""

    def score_queries(self, queries: Sequence[str], texts: Sequence[Sequence[str]]) -> list[np.ndarray | Exception]:
        score = self._handle.score.remote
        sends = [functools.partial(score, str(q), sendable_texts(t)) for q, t in zip(queries, texts)]
        responses = [send() for send in sends]
        results: list[np.ndarray | Exception] = []
        for send, response in zip(sends, responses):
            try:
                results.append(np.asarray(answer(send, response)["scores"], dtype=np.float64))
            except Exception as err:  # noqa: BLE001  (the reranker failure policy decides, per query)
                results.append(OperatorError(f"{self._where} failed: {type(err).__name__}: {err}",
                                             step=self.step_id, op=self.name))
        return results


class ServedEmbedder(_Served, SentenceTransformerEmbedder):
    """Embedder proxy: vectors come from the deployment, in concurrent chunks (batched there)."""

    @property
    def dimension(self) -> int:
        return int(self._info["dimension"])

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        chunks = [texts[i:i + EMBED_CHUNK] for i in range(0, len(texts), EMBED_CHUNK)]
        sends = [functools.partial(self._handle.embed.remote, list(chunk)) for chunk in chunks]
        responses = [send() for send in sends]
        try:
            parts = [np.asarray(answer(send, r)["vectors"], dtype=np.float32) for send, r in zip(sends, responses)]
        except Exception as err:  # noqa: BLE001
            raise OperatorError(f"{self._where} failed: {type(err).__name__}: {err}", step=self.step_id,
                                op=self.name) from err
        return np.concatenate(parts)


class ServedLLMStep(_Served, LLMStep):
    """Language-model proxy: each call is an OpenAI chat body sent to the deployment (as ``/v1/chat/completions``
    sends it), streamed when the step streams; prompts, parsing, usage records and failure policy are the step's."""

    def cache_identity(self) -> dict[str, Any]:
        """The in-process identity: the deployment runs the model the step's alias names (``serves``)."""
        return super(_Served, self).cache_identity()

    def calls(self, prompts: list[Prompt], on_text: Callable[[int, str], None] | None,
              options: Mapping[str, Any], seeds: list[int | None] | None = None) -> list[Completion | LLMError]:
        """Each prompt as a request to the deployment, with its seed of ``seeds`` (OpenAI's ``seed``, which both
        engines take), and ``options`` (an LLM judge's grammar, llama.cpp's ``response_format``) when the deployment
        runs llama.cpp, as the embedded model takes them in-process."""
        workers = min(len(prompts), self.params.concurrency or 4)
        sent = dict(options) if self._info["engine"] == "llama_cpp" else {}
        seeded = [sent if seeds is None or seeds[i] is None else {**sent, "seed": seeds[i]}
                  for i in range(len(prompts))]
        return each_concurrently(
            lambda i, prompt: self._call(prompt, None if on_text is None else (lambda piece: on_text(i, piece)),
                                         seeded[i]),
            prompts, workers)

    def _call(self, prompt: Prompt, on_text: Callable[[str], None] | None,
              options: Mapping[str, Any]) -> Completion | LLMError:
        """One model call, tried again (the step's ``num_retries`` times, else twice, with backoff) when the
        deployment lost its replica or shed the request before any text reached ``on_text``; an error inside the
        model, a timeout or a cancel is not tried again."""
        p, alias = self.params, resolve(self.params.model)
        body: dict[str, Any] = {"model": self._info.get("name"), "messages": messages_of(prompt),
                                "temperature": p.temperature, "max_tokens": p.max_tokens, **options}
        if on_text is not None:
            body.update(stream=True, stream_options={"include_usage": True})
        if self._info["engine"] == "vllm":
            from ray.serve.llm.openai_api_models import ChatCompletionRequest

            body = ChatCompletionRequest(**body)
        limit = p.timeout or alias.timeout or DEFAULT_TIMEOUT
        # The alias's num_retries is litellm's, towards the API it names (0 for the embedded model: a timeout would
        # recur); a lost replica is the deployment's, which Serve replaces.
        retries = DEFAULT_RETRIES if p.num_retries is None else p.num_retries
        started = time.perf_counter()
        try:
            for attempt in retrying(retries):
                with attempt:
                    reply = self._attempt(body, on_text, limit)
        except FlowCancelled:
            raise
        except _Expired:
            return LLMError(f"{self._where} did not answer within the step's timeout of {limit:g} s", kind="timeout")
        except Exception as err:  # noqa: BLE001  (the step's failure policy decides)
            cause = err.__cause__ if isinstance(err, _Streamed) else err
            return LLMError(f"{self._where} failed: {type(cause).__name__}: {str(cause).strip()[:300]}", kind="api")
        return Completion(text=reply.text, model=p.model, prompt_tokens=reply.prompt_tokens,
                          completion_tokens=reply.completion_tokens, seconds=time.perf_counter() - started,
                          finish_reason=reply.finish_reason)

    def _attempt(self, body: Any, on_text: Callable[[str], None] | None, limit: float) -> ChatReply:
        reply = ChatReply()
        events = self._handle.options(stream=True).chat.remote(body)
        # Serve's generator has no timeout of its own: past the step's timeout it is cancelled (which stops the
        # deployment's generation too), as litellm gives up on a call in-process.
        expired = threading.Event()
        deadline = threading.Timer(limit, lambda: (expired.set(), events.cancel()))
        deadline.daemon = True
        deadline.start()
        try:
            for event in events:
                checkpoint()
                for item in event if isinstance(event, list) else [event]:
                    reply.read(item, on_text)
        except FlowCancelled:
            events.cancel()
            raise
        except Exception as err:
            if expired.is_set():
                raise _Expired() from err
            if cancelled_by_serve(err):  # Serve cancels a handle call with the request that made it: a client gone
                raise FlowCancelled(f"{self._where}: the request that made this call was cancelled") from err
            if reply.text and on_text is not None:  # a reader saw part of this answer: a second would repeat it
                raise _Streamed() from err
            raise
        finally:
            deadline.cancel()
        return reply


class _Expired(Exception):
    """The step's timeout ended the call."""


class _Streamed(Exception):
    """The call failed after part of its answer was streamed (not tried again); ``__cause__`` is why."""


def cancelled_by_serve(err: BaseException) -> bool:
    """Whether Serve cancelled the call: it does so with the request whose handler made it (its client went away),
    which is a cancel of the flow, not a failure of the model for the step to mark its queries degraded by."""
    from ray.exceptions import TaskCancelledError
    from ray.serve.exceptions import RequestCancelledError

    return isinstance(err, (RequestCancelledError, TaskCancelledError))


def replica_lost(err: BaseException) -> bool:
    """Whether a call failed because its replica died or was unavailable, or the deployment shed it under load:
    a new replica (Serve starts one) or a moment later may answer."""
    from ray.exceptions import ActorUnavailableError, RayActorError
    from ray.serve.exceptions import BackPressureError, DeploymentUnavailableError, ReplicaUnavailableError

    return isinstance(err, (RayActorError, ActorUnavailableError, BackPressureError, DeploymentUnavailableError,
                            ReplicaUnavailableError))
