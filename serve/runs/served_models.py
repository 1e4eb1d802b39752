"""Which deployment of the app serves a step's model (``Service.place``): the same operator with the same model
params, or for a language-model step an alias naming the model a language-model deployment runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flows.spec import FlowSpec, Placement
from operators.errors import SpecError, unknown_name_hint


def placed(spec: FlowSpec, served: list[dict[str, Any]], app_name: str, *, check: bool = True) -> FlowSpec:
    """``spec`` with each step whose model a deployment of the app serves placed on it (a step that names its own
    placement keeps it); with ``check``, a placement on a deployment this app does not serve is the request's 422
    (a saved flow may name one the app serves later, as it may name a model not trained yet)."""
    steps = dict(spec.steps)
    for step_id, step in spec.steps.items():
        if step.placement is not None:
            if check:
                check_placement(step.placement, served, app_name, step_id)
            continue
        placement = served_placement(served, app_name, step.op, step.params, step_id)
        if placement is not None:
            steps[step_id] = step.model_copy(update={"placement": placement})
    return spec.model_copy(update={"steps": steps})


def check_placement(placement: Placement, served: list[dict[str, Any]], app_name: str, step_id: str) -> None:
    """A step placed on a deployment of this app that serves no model here (a typo, or a model the app skipped as
    missing) would only fail once it runs, as a 503 that waiting does not mend: refused first, naming the field.
    Other apps' deployments are left to the run."""
    names = [model["deployment"] for model in served]
    if placement.app == app_name and placement.deployment not in names:
        raise SpecError(f"no deployment named '{placement.deployment}' serves a model in this app"
                        + unknown_name_hint(placement.deployment, names, "deployments"),
                        step=step_id, field=f"steps.{step_id}.placement.deployment")


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
