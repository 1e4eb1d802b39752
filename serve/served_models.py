"""Which deployment of the app serves a step's model (``Service.place``): the same operator with the same model
params, or for a language-model step an alias naming the model a language-model deployment runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flows.spec import Placement


def served_placement(served: list[dict[str, Any]], app_name: str, op: str, params: dict[str, Any],
                     step_id: str) -> Placement | None:
    """The deployment among ``served`` (the app's model deployments) that serves the model of an ``op`` step with
    ``params``, if one does."""
    from flows.placement import CLIENT_PARAMS, RUNTIME_PARAMS
    from operators.registry import get_operator

    cls = get_operator(op, step=step_id)
    for model in served:
        if model["kind"] == "llm":
            if _serves_llm(cls, params, step_id, model):
                return Placement(deployment=model["deployment"], app=app_name)
            continue
        if model["op"] != cls.name:
            continue
        ignored = CLIENT_PARAMS[model["kind"]] | RUNTIME_PARAMS
        mine = cls(params, step_id=step_id).params.model_dump(mode="json")
        theirs = cls(model["params"], step_id=step_id).params.model_dump(mode="json")
        if all(mine[k] == theirs[k] for k in mine if k not in ignored):
            return Placement(deployment=model["deployment"], app=app_name)
    return None


def _serves_llm(cls: type, params: dict[str, Any], step_id: str, model: dict[str, Any]) -> bool:
    """Whether a language-model deployment runs the model of an LLM step with ``params``."""
    from flows.placement import serves
    from operators.errors import TesseraError
    from operators.llm.aliases import resolve
    from operators.llm.step import LLMStep

    if not issubclass(cls, LLMStep):
        return False
    try:
        step = cls(params, step_id=step_id)
        alias = resolve(step.params.model)
    except TesseraError:
        return False  # the step's own error, raised when the flow builds
    return step.calls_model() and serves(alias, model["engine"], model["model"])


def placed_ingest_spec(spec: str, path: Path, served: list[dict[str, Any]], app_name: str) -> str | dict[str, Any]:
    """The ingest spec, with its embed step on the app's deployment of the index's encoder when there is
    one: then neither the replica nor the task loads a model of its own (a fresh process spends ~10 s
    importing sentence-transformers and loading MiniLM)."""
    from flows.ingestion.plan import ANY_SOURCE, build_plan, embed_params, index_settings
    from flows.spec import FlowSpec

    plan = build_plan(spec, ANY_SOURCE, None)
    embed = embed_params(plan, index_settings(path, None, plan.settings_base))
    placement = served_placement(served, app_name, "embed.sentence_transformer", embed, "embed") if embed else None
    if placement is None:
        return spec
    placed = FlowSpec.load(spec).to_dict()
    placed["steps"]["embed"]["placement"] = placement.model_dump()
    return placed
