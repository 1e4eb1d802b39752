"""A search whose flow places a step on a deployment Serve gave up on (``DEPLOY_FAILED``: its replicas' constructor
raised three times) is a 503 ``deployment_failed`` naming the step's placement at once; the step waited 60 s for the
deployment to say what it hosts. On the shared Serve app, with a second app whose one embedder is broken (a model in
the repository, by name, whose config.json is no JSON)."""

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


def test_a_step_placed_on_a_failed_deployment_is_a_prompt_503_naming_it(broken_app):
    embed = {"op": "embed.sentence_transformer", "params": {"model": "broken-embedder"},
             "placement": {"deployment": "broken", "app": "placed-broken"}}
    flow = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 3}}, "embed": embed}}
    started = time.monotonic()
    answer = requests.post(f"{broken_app}/v1/search", json={"flow": flow, "query": "honey bees"}, timeout=120)
    assert answer.status_code == 503, answer.text
    error = answer.json()["error"]
    assert (error["param"], error["code"]) == ("steps.embed.placement.deployment", "deployment_failed"), error
    assert time.monotonic() - started < 10
