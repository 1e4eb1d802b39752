"""A request whose flow places a step on a deployment Serve gave up on (``DEPLOY_FAILED``: its replicas failed to
start, and none is tried again until the next deploy) is a 503 ``deployment_failed`` naming the step's placement
before the flow runs, and ``GET /flows`` lists such a flow as not runnable with that reason. The step asked the
deployment what it hosts and waited 60 s for an answer that never comes (``flows.placement.INFO_TIMEOUT_S``), then
failed the search, or the task once queued.

Serve's word is read from its controller, blocking (the callers run in threads, never on the event loop), at most
every ``FAILED_CHECK_S`` per process, and only for a flow that places a step: a service without Ray, or whose
controller does not answer, refuses nothing here (the run says what went wrong, as before).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from serve.http.errors import ApiError

log = logging.getLogger("tessera.serve")

#: How long requests reuse Serve's word on which deployments it gave up on (one controller call per this).
FAILED_CHECK_S = 2.0
_lock = threading.Lock()
_read: list[Any] = [-FAILED_CHECK_S, frozenset()]  # when, and the (app, deployment) pairs that failed


def failed_deployments() -> frozenset[tuple[str, str]]:
    """The ``(app, deployment)`` pairs Serve reports ``DEPLOY_FAILED`` (none without Ray or a controller)."""
    import ray

    with _lock:
        if time.monotonic() - _read[0] < FAILED_CHECK_S:
            return _read[1]
        failed: frozenset[tuple[str, str]] = frozenset()
        if ray.is_initialized():
            try:
                from ray import serve

                failed = frozenset((app, name) for app, status in serve.status().applications.items()
                                   for name, overview in status.deployments.items()
                                   if str(getattr(overview.status, "value", overview.status)) == "DEPLOY_FAILED")
            except Exception as err:  # noqa: BLE001  (no Serve here, or its controller did not answer: the run says)
                log.debug("Serve's deployment status could not be read: %s", err)
        _read[:] = [time.monotonic(), failed]
        return failed


def placed_steps(flow: Any) -> tuple[tuple[str, Any], ...]:
    """The needed steps of the built ``flow`` that run on a deployment, each with its placement."""
    return tuple((step, flow.spec.steps[step].placement) for step in flow.needed_steps()
                 if flow.spec.steps[step].placement is not None)


def refuse_failed_placements(flow: Any) -> None:
    """The 503 of the first step of the built ``flow`` placed on a deployment that Serve gave up on."""
    refuse_failed(placed_steps(flow))


def refuse_failed(placed: tuple[tuple[str, Any], ...]) -> None:
    """The 503 of the first of ``placed`` (``placed_steps``) on a deployment that Serve gave up on: a request's flow
    (``Service.prepare``), and ``GET /flows``'s ``reason`` for a flow that is not runnable
    (``serve.runs.flow_status``)."""
    if not placed:
        return
    failed = failed_deployments()
    for step, placement in placed:
        if (placement.app, placement.deployment) in failed:
            field = f"steps.{step}.placement.deployment"
            raise ApiError(503, f"{field}: deployment '{placement.deployment}' (app '{placement.app}') failed to start "
                           "and Serve stopped retrying it (GET /healthz says why); the step runs once the app is "
                           "deployed again", param=field, kind="server_error", code="deployment_failed")
