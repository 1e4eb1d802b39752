"""Run a flow step's model on its Serve deployment instead of in the flow's process.

A step with ``placement: {deployment: <name>, app: <app>}`` is replaced, for the run,
by a proxy: a subclass of the step's own operator class (same name, params, columns,
ranking code) whose model calls go to the deployment through a deployment handle.
Rerankers send each query's (query, candidate texts) and keep the shared
``Reranker`` selection, failure policy and output; embedders send the texts and keep
the operator's own text building and output column. The deployment hosts the same
operator class, so the output is the one the step would compute in-process. A
language-model step (``LLMStep``: answers, summaries, LLM rerankers, query rewriting)
sends each call as an OpenAI chat body to a language-model deployment (llama.cpp
replicas, or vLLM on GPU nodes) and keeps its prompts, parsing, usage records and
failure policy; streamed when a chat waits for the answer.

The step's model-defining params (``model``, ``max_length``, ``normalize``...) must
equal the deployment's (a language-model step's model alias must name the model the
deployment runs); a mismatch, or a deployment that cannot be reached (Ray or
Serve not running), raises a ``PlacementError`` naming the step and the deployment.
A call whose replica died, or that the deployment shed under load, is sent again
(``retrying``): Serve starts a new replica.
Placement is honoured by the local executor (the online path and the API deployment).
"""

from __future__ import annotations

import functools
import os
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from operators.base import Operator
from operators.embed.sentence_transformer import SentenceTransformerEmbedder
from operators.env_numbers import env_seconds
from operators.errors import FlowCancelled, OperatorError
from operators.interrupt import checkpoint, each_concurrently
from operators.llm.aliases import ModelAlias, resolve
from operators.llm.chat_reply import ChatReply
from operators.llm.gateway import DEFAULT_RETRIES, DEFAULT_TIMEOUT, Completion, LLMError, Prompt, messages_of
from operators.llm.step import LLMStep
from operators.rerank.base import Reranker, RerankParams, sendable_texts

# Params that only tune how a model runs, not what it ranks: they may differ from the deployment's
# (ColBERT's ``index``/``token_store`` only locate precomputed candidate tokens; the deployment encodes them).
RUNTIME_PARAMS = frozenset({"device", "predict_batch_size", "encode_batch_size", "index", "token_store"})
# Params a proxy applies on the flow's side (candidate selection, text building, output naming).
CLIENT_PARAMS = {
    "rerank": frozenset(RerankParams.model_fields),
    "embedding": frozenset({"input_column", "title_column", "output_column", "prompt"}),
}
#: Seconds a call to a deployment may take (``$TESSERA_PLACEMENT_TIMEOUT_S``, read at each call).
TIMEOUT_S = 600.0
INFO_TIMEOUT_S = 60.0  # for a deployment to say what it hosts
EMBED_CHUNK = 256  # texts per embed request, sent concurrently so the deployment batches them


class PlacementError(OperatorError):
    """A step placed on a Serve deployment cannot run there."""


class PlacementMismatch(PlacementError):
    """The step's placement names a deployment that cannot run it as the step asks (another operator, model or
    model param): the spec's to change, where ``NoReplica`` and an unreachable deployment are the service's."""


class NoReplica(PlacementError):
    """The deployment did not answer in time: it has no running replica."""


def place(op: Operator, *, deployment: str, app: str = "tessera") -> Operator:
    """A proxy of ``op`` whose model runs on the Serve deployment ``app/deployment``."""
    base, kind = served_base(op)
    where = f"Serve deployment '{app}/{deployment}'"
    handle = _handle(op, deployment, app, where)
    if kind == "llm":
        info = _llm_info(handle, op, where)
    else:
        info = _info(handle, op, where)
        _check_same_model(op, info, kind, where)
    proxy = proxy_class(type(op), base)(op.params, step_id=op.step_id, input_steps=op.input_steps)
    proxy.attach(handle, info, where)
    return proxy


def served_base(op: Operator) -> tuple[type[Operator], str]:
    """The proxy base that sends ``op``'s model calls to a deployment, and the deployment's kind."""
    if isinstance(op, LLMStep):  # first: the LLM rerankers are rerankers whose model is a language model
        return ServedLLMStep, "llm"
    if isinstance(op, Reranker):
        return ServedReranker, "rerank"
    if isinstance(op, SentenceTransformerEmbedder):
        return ServedEmbedder, "embedding"
    raise PlacementMismatch(f"only embedders, rerankers and language-model steps can run on a Serve deployment, "
                            f"not '{op.name}'; remove the step's placement", step=op.step_id, op=op.name)


@functools.cache
def proxy_class(cls: type[Operator], base: type[Operator]) -> type[Operator]:
    """``cls`` with ``base``'s served model calls in front of its own (same name, params and output)."""
    # the deployment runs cls's code: the step's cache key is the in-process step's (flows.cache_code)
    return type(f"Served{cls.__name__}", (base, cls), {"__module__": __name__, "__doc__": cls.__doc__,
                                                       "cache_code_of": cls})


def _handle(op: Operator, deployment: str, app: str, where: str) -> Any:
    try:
        import ray
        from ray import serve
    except ImportError as err:
        raise PlacementError(f"running on {where} needs Ray Serve (pip install 'ray[serve]'): {err}",
                             step=op.step_id, op=op.name) from None
    if not ray.is_initialized():
        if not os.environ.get("RAY_ADDRESS"):
            raise PlacementError(
                f"the step is placed on {where}, but this process is not connected to Ray: start the app "
                "(serve run serve/config.yaml), then run the flow with RAY_ADDRESS set (or after "
                "ray.init(address=...)), or remove the step's placement to run it in-process",
                step=op.step_id, op=op.name)
        ray.init()
    try:
        return serve.get_deployment_handle(deployment, app_name=app)
    except Exception as err:  # noqa: BLE001  (no controller, unknown app or deployment)
        raise PlacementError(f"the step is placed on {where}, which is not running: {type(err).__name__}: {err}; "
                             "start it (serve run serve/config.yaml) or remove the step's placement",
                             step=op.step_id, op=op.name) from None


def _info(handle: Any, op: Operator, where: str) -> dict[str, Any]:
    """What a Tessera deployment hosts (its ``info()``: operator, params, model)."""
    try:
        return handle.info.remote().result(timeout_s=INFO_TIMEOUT_S)
    except TimeoutError as err:  # Serve holds a call until a replica runs
        raise NoReplica(f"{where} did not answer within {INFO_TIMEOUT_S:g} s: it has no running replica yet (one "
                        "may still be loading its model, or the cluster lacks the CPUs or GPUs its replicas reserve: "
                        "`serve status` says which; docs/serving.md)", step=op.step_id, op=op.name) from err
    except Exception as err:  # noqa: BLE001
        if cancelled_by_serve(err):  # the request that asked was cancelled: not a deployment to ask something else
            raise FlowCancelled(f"{where}: the request that asked was cancelled", step=op.step_id, op=op.name) from err
        raise PlacementError(f"{where} does not answer: {type(err).__name__}: {err}", step=op.step_id,
                             op=op.name) from err


def _check_same_model(op: Operator, info: dict[str, Any], kind: str, where: str) -> None:
    if info.get("op") != op.name:
        raise PlacementMismatch(f"{where} hosts '{info.get('op')}', not '{op.name}'", step=op.step_id, op=op.name,
                                field="placement.deployment")
    mine, theirs = op.params.model_dump(mode="json"), info.get("params", {})
    for field, value in mine.items():
        if field in CLIENT_PARAMS[kind] or field in RUNTIME_PARAMS:
            continue
        if theirs.get(field) != value:
            raise PlacementMismatch(f"the step asks for {field}={value!r} but {where} hosts {field}="
                                    f"{theirs.get(field)!r}; make them equal or remove the step's placement",
                                    step=op.step_id, op=op.name, field=f"params.{field}")


def serves(alias: ModelAlias, engine: str, model: str) -> bool:
    """Whether a language-model deployment running ``model`` on ``engine`` answers as the alias's model does: the
    same GGUF file on llama.cpp (the embedded models), the alias's ``model_source`` on vLLM."""
    if engine == "vllm":
        return alias.model_source is not None and alias.model_source == model
    if engine != "llama_cpp" or not alias.embedded:
        return False
    from operators.llm.embedded_model import gguf_path
    from operators.models.references import ModelNotFoundError

    try:
        return gguf_path(alias.model.split("/", 1)[-1]).resolve() == gguf_path(model).resolve()
    except ModelNotFoundError:
        return False


def _llm_info(handle: Any, op: Operator, where: str) -> dict[str, Any]:
    """What a language-model deployment runs (engine, model), checked against the step's model alias."""
    try:
        info = _info(handle, op, where)  # Tessera's llama.cpp deployment
    except NoReplica:
        raise
    except PlacementError:  # not ours: ray.serve.llm's vLLM server tells its config instead
        try:
            config = handle.llm_config.remote().result(timeout_s=60)
        except Exception as err:  # noqa: BLE001
            raise PlacementError(f"{where} does not answer as a language model: {type(err).__name__}: {err}",
                                 step=op.step_id, op=op.name) from err
        source = config.model_loading_config.model_source
        info = {"engine": "vllm", "name": config.model_id, "model": source if isinstance(source, str) else None}
    if "engine" not in info:
        raise PlacementMismatch(f"{where} hosts '{info.get('op')}', not a language model", step=op.step_id,
                                op=op.name, field="placement.deployment")
    alias = resolve(op.params.model)
    if not serves(alias, info["engine"], str(info.get("model"))):
        raise PlacementMismatch(f"the step asks for model '{op.params.model}' ({alias.model}) but {where} runs "
                                f"{info.get('model')!r} on {info['engine']}; make them the same or remove the "
                                "step's placement", step=op.step_id, op=op.name, field="params.model")
    return info


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
              options: Mapping[str, Any]) -> list[Completion | LLMError]:
        """Each prompt as a request to the deployment, with ``options`` (an LLM judge's grammar, llama.cpp's
        ``response_format``) when the deployment runs llama.cpp, as the embedded model takes them in-process."""
        workers = min(len(prompts), self.params.concurrency or 4)
        sent = dict(options) if self._info["engine"] == "llama_cpp" else {}
        return each_concurrently(
            lambda i, prompt: self._call(prompt, None if on_text is None else (lambda piece: on_text(i, piece)),
                                         sent),
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
