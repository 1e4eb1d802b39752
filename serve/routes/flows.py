"""Saved flows over HTTP: list, get, save (validated first), delete, through ``flows.store``.

A flow is saved once it builds and passes what a run refuses of a spec alone (``Service.check_to_save``: the spec
guard, a model of another kind than its step loads), with the run's 422; a model not made yet does not stop it.

Each API key has its own saved flows (``flows.store``'s ``owner``); built-in flows are
readable by everyone and cannot be overwritten or deleted. Without keys, the caller
shares the saved flows of the CLI (``tessera flows``). The listing says of each flow whether
this service can run it, and why not, so a client (the web UI's Search tab) offers only those. A key that a flow
saved by the CLI holds (``rerank.api``'s ``api_key``) reads as ``***redacted***`` (``spec_guard.redacted``), and is
refused if sent back.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Request

from flows import store as flow_store
from flows.spec import FlowSpec
from operators.errors import one_line
from serve.runs import flow_status
from serve import service as svc
from serve.http.errors import ApiError
from serve.runs.flow_request import named_as_sent
from serve.runs.flow_resolution import flow_owner
from serve.indices.index_roots import check_depth
from serve.runs.param_numbers import check_numbers
from serve.routes.tasks import tenant
from serve.security.spec_guard import redacted

router = APIRouter(tags=["flows"])


@router.get("/flows", summary="Built-in flows and the caller's saved flows, and whether each can run here")
def list_flows(request: Request) -> dict[str, Any]:
    """``builtin`` and ``saved`` names, and ``status``: per name ``runnable`` and the ``reason`` it is not."""
    caller = tenant(request)
    builtin, saved = flow_store.builtin_names(), flow_store.saved_names(flow_owner(caller))
    now = flow_status.versions()
    problems = {name: flow_status.flow_problem(name, caller, now) for name in dict.fromkeys([*builtin, *saved])}
    return {"builtin": builtin, "saved": saved,
            "status": {name: {"runnable": problem is None, "reason": problem} for name, problem in problems.items()}}


@router.get("/flows/{name}", summary="One flow's spec")
def get_flow(name: str, request: Request) -> dict[str, Any]:
    caller = tenant(request)
    spec = svc.current().flow_spec(name, caller)
    if spec is None:  # none, or deleted while it was read
        known = flow_store.builtin_names() + flow_store.saved_names(flow_owner(caller))
        raise ApiError(404, f"no flow named '{one_line(name, 60)}'{flow_store.did_you_mean(name, known)}", param="name",
                       code="flow_not_found")
    return redacted(spec)  # a key a CLI-saved flow holds is never shown (its file keeps it)


@router.put("/flows/{name}", status_code=201, summary="Save a flow under a name, once it validates")
def save_flow(name: str, request: Request, spec: dict[str, Any] = Body(
        ..., description="A flow spec (Tessera's or a mosaicRAG request).",
        examples=[{"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 20}}}}])) -> dict[str, Any]:
    with named_as_sent(spec):  # a mosaicRAG body's fields as it wrote them (2.parameters.k)
        return _save_flow(name, request, spec)


def _save_flow(name: str, request: Request, spec: dict[str, Any]) -> dict[str, Any]:
    parsed = FlowSpec.parse(spec)
    for step_id, step in parsed.steps.items():  # (deeper ones fail to serialise: a 500, or a flow that never runs)
        check_depth(step.params, f"steps.{step_id}.params")
        check_numbers(step.params, f"steps.{step_id}.params")
    flow_store.check_name(name)
    if name in svc.current().model_names:  # a chat by that name reaches the model; /v1/models listed both
        raise ApiError(422, f"'{name}' is the name of a model this service serves (GET /v1/models), which a chat "
                       "with that name reaches; save the flow under another name", param="name",
                       code="invalid_value")
    svc.current().check_to_save(parsed.model_copy(update={"name": name}))  # a run's 422s for the spec alone
    flow_store.save(name, parsed, owner=flow_owner(tenant(request)))
    return {"name": name, "spec": parsed.model_copy(update={"name": name}).to_dict()}


@router.delete("/flows/{name}", summary="Delete one of the caller's saved flows")
def delete_flow(name: str, request: Request) -> dict[str, Any]:
    owner = flow_owner(tenant(request))
    try:
        flow_store.delete(name, owner)  # a built-in one is refused: a 422 naming name
    except flow_store.FlowNotFoundError:  # none, or another request deleted it first
        hint = flow_store.did_you_mean(name, flow_store.saved_names(owner))
        raise ApiError(404, f"no saved flow named '{one_line(name, 60)}'{hint}", param="name",
                       code="flow_not_found") from None
    return {"name": name, "deleted": True}
