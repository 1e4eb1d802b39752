"""What an operator meets when a model replica dies (``kill -9``, the OOM killer) and when a flow names a deployment
the app does not serve, on a real Serve app.

* A request in flight on a replica that is killed is a 503 ``deployment_unavailable`` with ``Retry-After`` (it was a
  500 ``model_error``), ``/healthz`` names the model as not ready until Serve has replaced the replica, and the same
  request then succeeds.
* A request to a model whose replicas never started (Serve gave up: ``DEPLOY_FAILED``) is a prompt 503
  ``deployment_failed`` (it waited for a replica that never comes), and ``/healthz`` says why without the traceback.
* A step placed on a deployment this app does not serve (a typo) is a 422 naming the field for ``/v1/search`` and
  ``/task/run`` alike (it was a 503 for a search, which no waiting mends, and a task that failed once queued).

The killed replica is an embedder of an app of its own (route prefix ``/replica-loss``) beside the package's app, so
the other modules' model keeps its replica."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import requests

from tests.text_checks import TRACEBACK

pytestmark = [pytest.mark.ray, pytest.mark.slow]

APP, PREFIX, MODEL = "replica-loss", "/replica-loss", "loss-minilm"


@pytest.fixture(scope="module")
def own_app(serve_app):
    """A models-only app (one MiniLM embedder, its own deployment name) on the package's Serve; its base URL."""
    from ray import serve

    from serve.app import build_app

    model = {"name": MODEL, "op": "embed.sentence_transformer", "params": {"model": "all-MiniLM-L6-v2"},
             "num_cpus": 0.25, "batching": {"max_batch_size": 8, "batch_wait_timeout_s": 0.01}}
    serve.run(build_app({"models": [model], "service": None}), name=APP, route_prefix=PREFIX)
    yield f"{serve_app}{PREFIX}"
    serve.delete(APP)


def _replica_pid() -> int:
    """The PID of the embedder's one replica, from the GCS's actor table (the session's Ray has no dashboard, which
    ``ray.util.state`` asks)."""
    from ray._private.state import actors

    alive = [a for a in actors(actor_state_name="ALIVE").values()
             if a["ActorClassName"] == f"ServeReplica:{APP}:{MODEL}"]
    assert len(alive) == 1, alive
    return alive[0]["Pid"]


def _model_state(url: str) -> tuple[int, str | None]:
    answer = requests.get(f"{url}/healthz", timeout=30)
    body = answer.json()
    return answer.status_code, (body.get("models") or body["error"]["models"]).get(MODEL)


def test_a_models_only_app_bounds_its_bodies_as_a_service_does(own_app):
    """Without a service (its limits), a body of any size reached the model's replica: now the service's default
    max_body_bytes holds, a 413 naming it, before any model sees the texts."""
    from serve.service_settings import Limits

    limit = Limits().max_body_bytes
    texts = ["honey bees " * 1000] * (limit // 10_000 + 1)
    answer = requests.post(f"{own_app}/v1/embeddings", json={"model": MODEL, "input": texts}, timeout=120)
    assert answer.status_code == 413, answer.text[:300]
    assert answer.json()["error"]["code"] == "max_body_bytes"


def test_a_killed_replica_is_a_503_with_retry_after_then_serves_again(own_app):
    texts = [f"honey bees make honey from nectar, sentence number {i}. " * 6 for i in range(2000)]  # seconds of work
    answers: list[requests.Response] = []
    sender = threading.Thread(target=lambda: answers.append(requests.post(
        f"{own_app}/v1/embeddings", json={"model": MODEL, "input": texts}, timeout=300)))
    from ray import serve

    replica = serve.get_deployment_handle(MODEL, app_name=APP)
    calls = replica.info.remote().result()["model_calls"]
    sender.start()
    while replica.info.remote().result()["model_calls"] == calls:  # until the request is on the replica (a fixed
        assert sender.is_alive(), answers                            # second was all of it on a fast machine)
    os.kill(_replica_pid(), signal.SIGKILL)
    sender.join(300)
    (lost,) = answers
    assert lost.status_code == 503, lost.text
    assert lost.headers["Retry-After"].isdigit()
    error = lost.json()["error"]
    assert error["code"] == "deployment_unavailable" and f"model '{MODEL}'" in error["message"]
    assert TRACEBACK not in lost.text

    # /healthz says so once Serve's controller has seen the replica die (a second or two), until a new one runs
    states: list[tuple[int, str | None]] = []
    for wanted, seconds in ((lambda s: s[0] == 503, 60), (lambda s: s[0] == 200, 240)):
        deadline = time.monotonic() + seconds
        while not (states and wanted(states[-1])) and time.monotonic() < deadline:
            time.sleep(0.5)
            states.append(_model_state(own_app))
    assert (503, "unhealthy") in states or (503, "loading") in states, states
    assert states[-1] == (200, "ready"), states
    again = requests.post(f"{own_app}/v1/embeddings", json={"model": MODEL, "input": ["honey bees"]}, timeout=120)
    assert again.status_code == 200, again.text


@pytest.mark.parametrize("route", ["/v1/search", "/task/run"])
def test_a_step_placed_on_a_deployment_the_app_does_not_serve_is_a_422(serve_app, route):
    flow = {"name": "typo", "steps": {
        "bm25": {"op": "retrieve.bm25", "params": {"k": 5}},
        "rerank": {"op": "rerank.cross_encoder", "params": {"model": "tessera-cross-encoder"},
                   "placement": {"deployment": "tessera-cross-encodr"}}}}
    answer = requests.post(f"{serve_app}{route}", json={"flow": flow, "query": "honey bees"}, timeout=120)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["param"] == "steps.rerank.placement.deployment"
    assert "no deployment named 'tessera-cross-encodr'" in error["message"]
    assert "did you mean 'tessera-cross-encoder'" in error["message"]


@pytest.fixture(scope="module")
def broken_app(serve_app, tmp_path_factory):
    """An app whose one embedder's folder holds a config.json that is no JSON: its replicas fail to start."""
    from ray import serve
    from ray.serve.api import _run

    from serve.app import build_app

    folder = tmp_path_factory.mktemp("broken-model")
    (folder / "config.json").write_text('{"not": "json"')
    model = {"name": "broken", "op": "embed.sentence_transformer", "params": {"model": str(folder)}, "num_cpus": 0}
    _run(build_app({"models": [model], "service": None}), _blocking=False, name="broken-model",
         route_prefix="/broken-model")  # serve.run would wait for a RUNNING app
    yield f"{serve_app}/broken-model", folder
    serve.delete("broken-model")


def test_a_model_whose_replicas_never_start_is_a_prompt_503(broken_app):
    url, folder = broken_app
    deadline, body = time.monotonic() + 300, {}
    while time.monotonic() < deadline:
        body = requests.get(f"{url}/healthz", timeout=30).json()
        if "failed to start 3 times" in body.get("error", {}).get("message", ""):
            break
        time.sleep(2)
    message = body["error"]["message"]
    assert "model 'broken' is unhealthy" in message, body
    assert "pid=" not in message and str(folder) not in message and "File " not in message, message
    started = time.monotonic()
    answer = requests.post(f"{url}/v1/embeddings", json={"model": "broken", "input": ["bees"]}, timeout=60)
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"]["code"] == "deployment_failed" and "model 'broken'" in answer.text
    assert time.monotonic() - started < 10
