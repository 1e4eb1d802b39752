"""The application builder: ``serve run serve/config.yaml`` calls ``build_app(args)``.

One model deployment per entry of ``args.models`` (embedder or reranker, by the
operator's class) and per language model of ``args.llms`` (``/v1/chat/completions``), plus the HTTP
ingress, which also serves the flow routes configured by
``args.service`` (``serve/service_settings.py``: default index, task store, API keys,
limits; resolved here, in the process that builds the app). A model whose operator or weights are not on
this machine is, by default (``missing_models: skip``), left out with a warning in the
log, and ``GET /v1/models`` lists it with ``status: missing`` and the reason, so the app
starts with what exists; ``missing_models: fail`` stops the build with the
ModelNotFoundError message instead. A config mistake (unknown field, bad params, an
operator that is neither an embedder nor a reranker) always fails the build.

GPUs: a replica asks for ``num_gpus`` from its config (0 by default), never for what the
cluster happens to have while the app is built: on a cluster whose GPU worker group is
scaled to zero, a replica that asks for a GPU makes the autoscaler start a GPU node.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from ray.serve import Application

from operators.api_keys import KEYS_ENV, env_keys_problem
from operators.errors import ParamsError, UnknownOperatorError
from operators.models import ModelNotFoundError
from serve import service_settings
from serve.settings import AppArgs, LLMDeploymentArgs, ModelDeploymentArgs, ServeConfigError, parse_args  # noqa: F401

log = logging.getLogger("tessera.serve")


def build_app(args: dict[str, Any] | AppArgs) -> Application:
    """The Serve application for ``args`` (the ``args`` of an application in serve/config.yaml)."""
    from serve.api import ModelAPI

    settings = parse_args(args)
    handles: dict[str, Any] = {}
    cards: list[dict[str, Any]] = []
    served: list[dict[str, Any]] = []  # what the flow routes may place steps on
    for model in settings.models:
        if model.deployment_name == settings.api_deployment:
            raise ServeConfigError(f"deployment name '{model.deployment_name}' is the API deployment's name",
                                   field=f"models.{model.name}.deployment")
        kind, problem, reason = check_model(model)
        card = {"id": model.name, "type": kind, "operator": model.op, "deployment": model.deployment_name,
                "aliases": model.aliases, "status": "ready" if problem is None else "missing", "reason": reason}
        cards.append(card)
        if problem is not None:
            if settings.missing_models == "fail":
                raise ModelNotFoundError(problem, field=f"models.{model.name}")
            log.warning("tessera serve: model '%s' is not deployed (the app starts without it): %s",
                        model.name, problem)
            continue
        handles[model.deployment_name] = model_deployment(model, kind)
        served.append({"deployment": model.deployment_name, "op": model.op, "params": model.params, "kind": kind})
    for llm in settings.llms:
        from serve.deployments.llm import engine_problem, llm_deployment

        problem, reason = engine_problem(llm) or (None, None)
        cards.append(llm_card(llm, reason))
        if problem is not None:
            if settings.missing_models == "fail":
                raise ModelNotFoundError(problem, field=f"llms.{llm.name}")
            log.warning("tessera serve: language model '%s' is not deployed: %s", llm.name, problem)
            continue
        handles[llm.deployment_name] = llm_deployment(llm)
        served.append({"deployment": llm.deployment_name, "kind": "llm", "engine": llm.engine, "model": llm.model})
    api = ModelAPI.options(name=settings.api_deployment, ray_actor_options={"num_cpus": settings.api_num_cpus})
    service = None if settings.service is None else service_settings.resolve(settings.service)
    if service is not None and (problem := env_keys_problem(os.environ)):  # as tessera serve, under a plain serve run
        raise ServeConfigError(problem, field=KEYS_ENV)
    if service is not None:
        check_task_store(service["task_store"], given=settings.service.task_store is not None)
    return api.bind(handles, cards, service, served)


def llm_card(llm: LLMDeploymentArgs, reason: str | None) -> dict[str, Any]:
    """The ``GET /v1/models`` entry of a served language model; ``reason``: why it is not deployed (None: it is)."""
    return {"id": llm.name, "type": "chat", "operator": f"llm.{llm.engine}", "engine": llm.engine,
            "deployment": llm.deployment_name, "aliases": llm.aliases, "context_window": llm.context_window,
            "status": "ready" if reason is None else "missing", "reason": reason}


def check_task_store(url: str, *, given: bool) -> None:
    """Open the task store once while the app is built, so one that cannot be opened (a path under a file, a file
    that is no database, a server that refuses the connection, no driver) fails the build with one line naming it:
    Serve marks the application DEPLOY_FAILED at once. Left to the ingress replica, each start failed with a
    traceback until Serve gave up, and HTTP said only that the deployment failed to deploy."""
    from serve.tasks.taskstore import TaskStore, TaskStoreError

    try:
        TaskStore(url).engine.dispose()
    except TaskStoreError as err:
        where = "args.service.task_store" if given else "TESSERA_HOME"
        raise ServeConfigError(f"{err.message}{'' if given else ' (the default store, under TESSERA_HOME)'}; "
                               "fix it and deploy again", field=where) from None


def check_model(model: ModelDeploymentArgs) -> tuple[str, str | None, str | None]:
    """The model's kind (``embedding``/``rerank``), why it cannot be deployed here (None if it can), and that reason
    as its card gives it to clients (``GET /v1/models``, the 404 of a request for it): worded without this
    machine's paths (the model named as the config names it, not its folder or ``$TESSERA_HOME``); the log and a
    ``missing_models: fail`` build keep the first."""
    from operators.embed.sentence_transformer import SentenceTransformerEmbedder
    from operators.registry import get_operator, skipped_modules
    from operators.rerank.base import Reranker

    field = f"models.{model.name}"
    try:
        cls = get_operator(model.op)
    except UnknownOperatorError as err:
        kind = "rerank" if model.op.startswith("rerank.") else "embedding"
        category = model.op.split(".", 1)[0]
        skipped = {m: r for m, r in skipped_modules().items() if m.startswith(f"operators.{category}.")}
        why = f" (modules not importable: {skipped})" if skipped else ""  # (an import error can name a file)
        return kind, f"operator '{model.op}' is not available{why}: {err.message}", \
            f"operator '{model.op}' is not available: {err.message}"
    if issubclass(cls, Reranker):
        kind = "rerank"
    elif issubclass(cls, SentenceTransformerEmbedder):
        kind = "embedding"
    else:
        raise ServeConfigError(f"operator '{model.op}' is neither an embedder nor a reranker", field=f"{field}.op")
    try:
        op = cls(model.params, step_id=model.name)
    except ParamsError as err:
        raise ServeConfigError(err.message, field=f"{field}.{err.field}") from None
    from flows.model_check import operator_error

    error = operator_error(op)  # missing, or of the wrong kind (a bi-encoder where a cross-encoder belongs)
    return (kind, None, None) if error is None else (kind, error.message, error.public)


def model_deployment(model: ModelDeploymentArgs, kind: str) -> Application:
    """The bound deployment hosting ``model``."""
    from serve.deployments.embedder import EmbedderDeployment
    from serve.deployments.reranker import RerankerDeployment

    cls = EmbedderDeployment if kind == "embedding" else RerankerDeployment
    return cls.options(**deployment_options(model)).bind(model.name, model.op, model.params)


def deployment_options(model: ModelDeploymentArgs) -> dict[str, Any]:
    """Serve's options for ``model``'s deployment, from its config alone (batching as ``user_config``, so
    ``serve deploy`` can retune it; resources as configured, whatever the cluster has at this moment)."""
    scaling = model.autoscaling
    return {
        "name": model.deployment_name,
        "user_config": model.batching.model_dump(),
        "max_ongoing_requests": model.max_ongoing_requests,
        "autoscaling_config": {"min_replicas": scaling.min_replicas, "initial_replicas": max(scaling.min_replicas, 1),
                               "max_replicas": scaling.max_replicas,
                               "target_ongoing_requests": scaling.target_ongoing_requests},
        "ray_actor_options": {"num_cpus": model.num_cpus, "num_gpus": model.num_gpus},
    }
