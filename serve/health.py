"""Whether each configured model can answer now, read from Serve's own status, never assumed.

The ingress answers as soon as its own replica is up, while a model deployment may
still be loading its weights. A model replica is RUNNING only once its constructor
has returned, and the constructor loads the model and runs one forward pass, so
"a RUNNING replica" is "loaded". ``GET /v1/models`` and ``GET /healthz`` read that from
``serve.status()``: it asks the controller and wakes nothing, where a call through a
deployment handle would start a replica of a deployment scaled to zero.
"""

from __future__ import annotations

import asyncio
from typing import Any, Mapping

from serve.schemas import ModelCard

_FAILED = {"UNHEALTHY", "DEPLOY_FAILED"}
_GONE = {"STOPPING", "STOPPED"}


def _name(value: Any) -> str:
    """An enum member of Serve's status (a str enum) or a plain string, as its value."""
    return str(getattr(value, "value", value))


def model_state(overview: Any | None) -> tuple[str, str | None]:
    """``(state, reason)`` of a deployed model from its deployment's status overview (None: not created yet).

    ``overview`` has Serve's ``DeploymentStatusOverview`` fields: ``status``, ``replica_states``
    (state -> count) and ``message``."""
    if overview is None:
        return "loading", "the deployment is not created yet"
    replicas = {_name(state): count for state, count in (overview.replica_states or {}).items() if count}
    if replicas.get("RUNNING"):
        return "ready", None
    message = overview.message or None
    if _name(overview.status) in _FAILED:
        return "unhealthy", message
    if not set(replicas) - _GONE and _name(overview.status) == "HEALTHY":
        return "idle", "scaled to zero replicas: the next request starts one, which loads the model"
    return "loading", message


def live_cards(cards: list[ModelCard], deployments: Mapping[str, Any]) -> list[ModelCard]:
    """``cards`` with each deployed model's current state (a missing model stays missing)."""
    live = []
    for card in cards:
        if card.status == "missing":
            live.append(card)
            continue
        state, reason = model_state(deployments.get(card.deployment))
        live.append(card.model_copy(update={"status": state, "reason": reason}))
    return live


def readiness(cards: list[ModelCard]) -> str | None:
    """Why the app is not ready (None when every configured model that is not missing has loaded)."""
    waiting = [f"model '{c.id}' is {c.status}" + (f" ({c.reason})" if c.reason else "")
               for c in cards if c.status not in ("ready", "missing")]
    return "; ".join(waiting) or None


async def deployment_statuses(app_name: str) -> Mapping[str, Any]:
    """Serve's status overview of each deployment of ``app_name`` (a blocking controller call, off the loop)."""
    from ray import serve

    status = await asyncio.to_thread(serve.status)
    app = status.applications.get(app_name)
    return app.deployments if app is not None else {}
