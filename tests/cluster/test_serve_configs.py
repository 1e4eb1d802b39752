"""The cluster's Serve configs (cluster/serve-gpu.yaml, the RayService's serveConfigV2) through Serve's own schema and
Tessera's application args, serving what serve/config.yaml serves (checked in tests/serve/test_app_config.py), on
GPUs."""

from __future__ import annotations

import copy
import importlib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CONFIGS = ("cluster/serve-gpu.yaml", "cluster/kuberay/rayservice.yaml")


def serve_config(name: str) -> dict:
    doc = yaml.safe_load((REPO / name).read_text(encoding="utf-8"))
    return yaml.safe_load(doc["spec"]["serveConfigV2"]) if doc.get("kind") == "RayService" else doc


def check(config: dict) -> None:
    """Serve's ``ServeDeploySchema``, then each application's import path and its args as the builder reads them."""
    from ray.serve.schema import ServeDeploySchema

    from serve.app import parse_args

    for app in ServeDeploySchema.model_validate(config).applications:
        module, _, attr = app.import_path.partition(":")
        builder = getattr(importlib.import_module(module), attr, None)
        if not callable(builder):
            raise TypeError(f"import_path {app.import_path} does not name a callable")
        parse_args(app.args)


def served(config: dict) -> dict[str, dict]:
    args = config["applications"][0]["args"]
    return {m["name"]: m for m in [*args["models"], *args["llms"]]}


@pytest.mark.parametrize("name", CONFIGS)
def test_the_serve_config_validates(name):
    check(serve_config(name))


def test_the_cluster_launcher_and_kuberay_serve_the_same_app():
    assert served(serve_config("cluster/serve-gpu.yaml")) == served(serve_config("cluster/kuberay/rayservice.yaml"))


@pytest.mark.parametrize("name", CONFIGS)
def test_the_cluster_serves_serve_configs_models_on_gpus(name):
    local, cluster = served(serve_config("serve/config.yaml")), served(serve_config(name))
    for model, entry in local.items():
        assert model in cluster, f"{name} leaves out {model}"
        same = ("op", "params", "engine", "model", "aliases")
        assert {k: cluster[model].get(k) for k in same} == {k: entry.get(k) for k in same}, model
        if "op" in entry:
            assert cluster[model]["num_gpus"] > 0, f"{model} runs on CPUs in {name}"
        assert cluster[model]["autoscaling"]["max_replicas"] > entry["autoscaling"]["max_replicas"]
    assert any(m.get("engine") == "vllm" for m in cluster.values())


@pytest.mark.parametrize("breakage, reason", [
    ("two apps of one name", "multiple configs for application"),
    ("no import path", "import_path"),
    ("import path not found", "No module named 'serve.ap'"),
    ("gpus left to chance", "'auto' is not accepted"),
    ("misspelt arg", "unknown field"),
])
def test_a_broken_serve_config_is_refused(breakage, reason):
    config = copy.deepcopy(serve_config("cluster/serve-gpu.yaml"))
    app = config["applications"][0]
    if breakage == "two apps of one name":
        config["applications"].append(copy.deepcopy(app))
    elif breakage == "no import path":
        del app["import_path"]
    elif breakage == "import path not found":
        app["import_path"] = "serve.ap:build_app"
    elif breakage == "gpus left to chance":
        app["args"]["models"][0]["num_gpus"] = "auto"
    else:
        app["args"]["models"][0]["num_gpu"] = 1
    with pytest.raises(Exception, match=reason):
        check(config)
