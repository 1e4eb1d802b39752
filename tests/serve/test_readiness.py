"""Readiness means ready: /healthz and /v1/models report whether each model has loaded in a replica, read from
Serve's status; /v1/models/{id} answers OpenAI's ``models.retrieve``."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import requests

from serve.schemas import ModelCard


def overview(status: str, message: str = "", **replicas: int) -> SimpleNamespace:
    """What ``serve.status()`` gives for a deployment (a DeploymentStatusOverview's fields)."""
    return SimpleNamespace(status=status, replica_states=replicas, message=message)


@pytest.mark.parametrize("state, expected", [
    (None, "loading"),
    (overview("UPDATING", "1 replica has taken more than 30s to be scheduled", STARTING=1), "loading"),
    (overview("UPSCALING", STARTING=1), "loading"),
    (overview("HEALTHY", RUNNING=1), "ready"),
    (overview("UPSCALING", RUNNING=1, STARTING=1), "ready"),
    (overview("UNHEALTHY", "the constructor raised", STARTING=1), "unhealthy"),
    (overview("DEPLOY_FAILED", "the constructor raised"), "unhealthy"),
    (overview("HEALTHY"), "idle"),
    (overview("HEALTHY", STOPPING=1), "idle"),
])
def test_model_state_from_the_deployments_status(state, expected):
    from serve.health import model_state

    assert model_state(state)[0] == expected


def test_a_replica_loading_its_model_is_said_so_not_in_serves_words_for_a_slow_constructor():
    """The web UI's badge showed "... This may be caused by a slow __init__ or reconfigure method." while MiniLM
    loaded on 2 cores, as if something were wrong."""
    from serve.health import model_state

    message = ("Deployment 'all-MiniLM-L6-v2' in application 'tessera' has 1 replicas that have taken more than 30s "
               "to initialize. This may be caused by a slow __init__ or reconfigure method.")
    assert model_state(overview("UPDATING", message, STARTING=1)) == (
        "loading", "its replica has been loading the model for more than 30s")


def test_a_failed_replicas_traceback_is_not_in_the_reason():
    """What Serve said of an embedder whose folder held a broken config.json: /healthz, open to every client, gave
    the traceback with the server's files, the replica's pid, ip and actor id."""
    from serve.health import model_state

    message = ("The deployment failed to start 3 times in a row. This may be due to a problem with its constructor or "
               "initial health check failing. See controller logs for details. Error:\n"
               "\x1b[36mray::ServeReplica:tessera:broken.initialize_and_get_metadata()\x1b[39m (pid=17857, "
               "ip=192.0.2.2, actor_id=3efbe801bb01bd889c0f827701000000)\n"
               '  File "/srv/venv/lib/python3.11/site-packages/sentence_transformers/SentenceTransformer.py", line 3\n'
               "    raise err\n"
               "OSError: /srv/models/broken/config.json is not valid JSON\n")
    state, reason = model_state(overview("DEPLOY_FAILED", message))
    assert state == "unhealthy"
    assert reason == ("The deployment failed to start 3 times in a row. This may be due to a problem with its "
                      "constructor or initial health check failing. See controller logs for details. Error: OSError: "
                      "config.json is not valid JSON")


def card(id: str, status: str = "ready", reason: str | None = None) -> ModelCard:
    return ModelCard(id=id, type="rerank", operator="rerank.cross_encoder", deployment=id, status=status,
                     reason=reason)


def test_ready_only_when_every_deployed_model_has_loaded():
    from serve.health import live_cards, readiness

    cards = [card("a"), card("b"), card("gone", "missing", "weights absent")]
    live = live_cards(cards, {"a": overview("HEALTHY", RUNNING=1), "b": overview("UPDATING", "waiting", STARTING=1)})
    assert [(c.status, c.reason) for c in live] == [("ready", None), ("loading", "waiting"),
                                                    ("missing", "weights absent")]
    assert readiness(live) == "model 'b' is loading (waiting)"
    live = live_cards(cards, {"a": overview("HEALTHY", RUNNING=1), "b": overview("HEALTHY", RUNNING=2)})
    assert readiness(live) is None  # a missing model does not hold readiness back: it will never load


# -- over HTTP ---------------------------------------------------------------------------


@pytest.mark.ray
def test_healthz_is_200_once_every_model_has_loaded(serve_app):
    response = requests.get(serve_app + "/healthz", timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["models"] == {"all-MiniLM-L6-v2": "ready", "tessera-cross-encoder": "ready",
                                         "absent-ce": "missing", "tessera-colbert": "ready",
                                         "smollm2": "ready"}


@pytest.mark.ray
@pytest.mark.parametrize("name", ["all-MiniLM-L6-v2", "minilm", "sentence-transformers/all-MiniLM-L6-v2"])
def test_one_model_by_id_or_alias(serve_app, name):
    response = requests.get(f"{serve_app}/v1/models/{name}", timeout=30)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == "all-MiniLM-L6-v2" and body["object"] == "model" and body["status"] == "ready"


@pytest.mark.ray
def test_an_unknown_model_id_is_an_openai_404(serve_app):
    response = requests.get(serve_app + "/v1/models/gpt-4o", timeout=30)
    assert response.status_code == 404
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == "model_not_found"
    assert "gpt-4o" in error["message"] and "all-MiniLM-L6-v2" in error["message"]
    served = error["message"].split("; served: ", 1)[1].split(", ")  # what runs here, as GET /v1/models has it
    assert {"all-MiniLM-L6-v2", "smollm2", "rag"} <= set(served), served
    assert "rag_gold" not in served and "absent-ce" not in served, served  # missing: listed as served before


@pytest.mark.ray
def test_the_openai_client_retrieves_a_model(serve_app):
    import openai

    client = openai.OpenAI(base_url=serve_app + "/v1", api_key="x")
    assert client.models.retrieve("minilm").id == "all-MiniLM-L6-v2"
    assert client.models.retrieve("sentence-transformers/all-MiniLM-L6-v2").id == "all-MiniLM-L6-v2"
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("gpt-4o")


@pytest.fixture
def waiting_app(serve_app):
    """A second app whose model replica can never start here (it asks for a GPU, as on a cluster whose GPU group
    is at zero), deployed without waiting for it; yields its base URL; deleted afterwards."""
    from ray import serve

    from serve.app import build_app

    args = {"api_deployment": "waiting-api", "models": [
        {"name": "gpu-minilm", "op": "embed.sentence_transformer", "num_cpus": 0, "num_gpus": 1}]}
    serve._run(build_app(args), name="waiting", route_prefix="/waiting", _blocking=False)  # run() waits for RUNNING
    try:
        yield serve_app + "/waiting"
    finally:  # not waiting for the pending replica's graceful shutdown: nothing else uses this app's names
        serve.delete("waiting", _blocking=False)


def first_answer(url: str, timeout_s: float = 120) -> requests.Response:
    """The first answer of the app's own ingress at ``url`` (Serve's proxy answers in plain text until it is up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = requests.get(url, timeout=30)
        if response.headers.get("content-type", "").startswith("application/json") or time.monotonic() > deadline:
            return response
        time.sleep(0.5)


@pytest.mark.ray
@pytest.mark.slow
def test_a_model_still_loading_is_not_ready(waiting_app):
    health = first_answer(waiting_app + "/healthz")
    assert health.status_code == 503, health.text
    error = health.json()["error"]
    assert error["code"] == "not_ready" and "model 'gpu-minilm' is loading" in error["message"]
    models = requests.get(waiting_app + "/v1/models", timeout=30).json()["data"]
    assert [(m["id"], m["status"]) for m in models if m["type"] != "flow"] == [("gpu-minilm", "loading")]
