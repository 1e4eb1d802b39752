"""A search whose flow places a step on a deployment Serve gave up on (``DEPLOY_FAILED``: its replicas' constructor
raised three times) is a 503 ``deployment_failed`` naming the step's placement at once; the step waited 60 s for the
deployment to say what it hosts; ``GET /flows`` lists a saved flow with such a step as not runnable, with that reason.
On the shared Serve app, with a second app whose one embedder is broken (a model in the repository, by name, whose
config.json is no JSON)."""

from __future__ import annotations

import time

import pytest
import requests

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def broken_app(serve_app, tessera_home):
    from ray import serve
    from ray.serve.api import _run

    from serve.app import build_app

    folder = tessera_home / "models" / "broken-embedder"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"not": "json"')
    model = {"name": "broken", "op": "embed.sentence_transformer", "params": {"model": "broken-embedder"},
             "num_cpus": 0}
    _run(build_app({"models": [model], "service": None}), _blocking=False, name="placed-broken",
         route_prefix="/placed-broken")  # serve.run would wait for a RUNNING app
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        deployments = serve.status().applications["placed-broken"].deployments
        if str(getattr(deployments["broken"].status, "value", "")) == "DEPLOY_FAILED":
            break
        time.sleep(2)
    yield serve_app
    serve.delete("placed-broken")


EMBED = {"op": "embed.sentence_transformer", "params": {"model": "broken-embedder"},
         "placement": {"deployment": "broken", "app": "placed-broken"}}
FLOW = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}, "embed": EMBED}}


def test_a_step_placed_on_a_failed_deployment_is_a_prompt_503_naming_it(broken_app):
    started = time.monotonic()
    answer = requests.post(f"{broken_app}/v1/search", json={"flow": FLOW, "query": "honey bees"}, timeout=120)
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == ("steps.embed.placement.deployment", "deployment_failed"), error
    assert time.monotonic() - started < 10


def test_a_saved_flow_with_such_a_step_is_listed_as_not_runnable_saying_why(broken_app):
    saved = requests.put(f"{broken_app}/flows/on-broken", json=FLOW, timeout=60)
    assert saved.status_code == 201, saved.text
    try:
        listed = requests.get(f"{broken_app}/flows", timeout=60)
        assert listed.status_code == 200, listed.text
        status = listed.json()["status"]["on-broken"]
        assert status["runnable"] is False, status
        assert status["reason"].startswith("steps.embed.placement.deployment: deployment 'broken' "
                                           "(app 'placed-broken') failed to start"), status
        for running in ("bm25", "dense"):  # on no deployment, and on the shared app's MiniLM, which runs
            assert listed.json()["status"][running] == {"runnable": True, "reason": None}, running
    finally:
        requests.delete(f"{broken_app}/flows/on-broken", timeout=60)
