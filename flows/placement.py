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
Placement is honoured by the local executor (the online path and the API deployment). The proxies and their
calls to a deployment are ``flows.served_steps``.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from flows.served_steps import (EMBED_CHUNK, TIMEOUT_S, ServedEmbedder, ServedLLMStep,  # noqa: F401 (re-exported)
                                ServedReranker, answer, call_timeout_s, cancelled_by_serve, replica_lost, retrying)
from operators.base import Operator
from operators.embed.sentence_transformer import SentenceTransformerEmbedder
from operators.errors import FlowCancelled, OperatorError, see_docs
from operators.llm.aliases import ModelAlias, resolve
from operators.llm.step import LLMStep
from operators.rerank.base import Reranker, RerankParams

# Params that only tune how a model runs, not what it ranks: they may differ from the deployment's
# (ColBERT's ``index``/``token_store`` only locate precomputed candidate tokens; the deployment encodes them).
RUNTIME_PARAMS = frozenset({"device", "predict_batch_size", "encode_batch_size", "index", "token_store"})
# Params a proxy applies on the flow's side (candidate selection, text building, output naming).
CLIENT_PARAMS = {
    "rerank": frozenset(RerankParams.model_fields),
    "embedding": frozenset({"input_column", "title_column", "output_column", "prompt"}),
}
INFO_TIMEOUT_S = 60.0  # for a deployment to say what it hosts


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
                "(tessera serve), then run the flow with RAY_ADDRESS set (or after "
                "ray.init(address=...)), or remove the step's placement to run it in-process",
                step=op.step_id, op=op.name)
        ray.init()
    try:
        return serve.get_deployment_handle(deployment, app_name=app)
    except Exception as err:  # noqa: BLE001  (no controller, unknown app or deployment)
        raise PlacementError(f"the step is placed on {where}, which is not running: {type(err).__name__}: {err}; "
                             "start it (tessera serve) or remove the step's placement",
                             step=op.step_id, op=op.name) from None


def _info(handle: Any, op: Operator, where: str) -> dict[str, Any]:
    """What a Tessera deployment hosts (its ``info()``: operator, params, model)."""
    try:
        return handle.info.remote().result(timeout_s=INFO_TIMEOUT_S)
    except TimeoutError as err:  # Serve holds a call until a replica runs
        raise NoReplica(f"{where} did not answer within {INFO_TIMEOUT_S:g} s: it has no running replica yet (one "
                        "may still be loading its model, or the cluster lacks the CPUs or GPUs its replicas reserve: "
                        f"`serve status` says which); see {see_docs('serving')}", step=op.step_id, op=op.name) from err
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
