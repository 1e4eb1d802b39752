"""cluster/ray-cluster-aws.yaml, checked as ``ray up`` checks it (the JSON schema the installed ``ray`` ships, then
Ray's own semantic checks), and what it refers to: the clone it mounts and the Serve config it deploys."""

from __future__ import annotations

import copy
import json
import shlex
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "cluster" / "ray-cluster-aws.yaml"


@pytest.fixture(scope="module")
def ray_schema() -> dict:
    import ray.autoscaler

    return json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text(encoding="utf-8"))


@pytest.fixture
def config() -> dict:
    return yaml.safe_load(LAUNCHER.read_text(encoding="utf-8"))


def ray_checks(config: dict) -> None:
    """What ``ray up`` does before it reaches the cloud: fill in the provider's defaults, then validate."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(copy.deepcopy(config)))


def test_the_launcher_yaml_validates(config, ray_schema, schema_errors):
    assert schema_errors(jsonschema.Draft7Validator(ray_schema), config) == []
    ray_checks(config)


def test_a_cpu_head_a_cpu_group_and_a_gpu_group_from_zero(config):
    types = config["available_node_types"]
    assert "GPU" not in types[config["head_node_type"]]["resources"]
    workers = {name: t for name, t in types.items() if name != config["head_node_type"]}
    gpu = [t for t in workers.values() if t["resources"].get("GPU", 0) > 0]
    cpu = [t for t in workers.values() if not t["resources"].get("GPU")]
    assert len(gpu) == 1 and gpu[0]["min_workers"] == 0 and gpu[0]["max_workers"] > 0
    assert "--gpus all" in gpu[0]["docker"]["worker_run_options"]
    assert cpu and cpu[0]["max_workers"] >= cpu[0]["min_workers"]


def test_every_node_installs_tessera_gpu_from_the_mounted_clone(config):
    mounts = config["file_mounts"]
    clones = [dst for dst, src in mounts.items() if Path(REPO / src).resolve() == REPO]
    assert len(clones) == 1
    clone = clones[0]
    install = " ".join(config["setup_commands"])
    assert f"cd {clone}" in install and '-e ".[gpu' in install
    assert not any(t.get("worker_setup_commands") for t in config["available_node_types"].values()), \
        "a node type's worker_setup_commands replace setup_commands: that node would not install Tessera"


def test_the_head_deploys_a_serve_config_of_the_repository(config):
    deploys = [shlex.split(c.split("&&")[-1]) for c in config["head_start_ray_commands"] if "serve deploy" in c]
    assert len(deploys) == 1
    target = REPO / deploys[0][-1]
    assert target.is_file(), f"the head deploys {target}, which is not in the repository"
    assert yaml.safe_load(target.read_text(encoding="utf-8"))["applications"]


def ray_starts(commands: list[str]) -> list[dict[str, str]]:
    """The environment each ``ray start`` of ``commands`` sets in front of itself (``VAR=value ray start ...``)."""
    starts = []
    for command in commands:
        words = shlex.split(command)
        if "ray" in words and words[words.index("ray") + 1:words.index("ray") + 2] == ["start"]:
            assignments = words[:words.index("ray")]
            starts.append(dict(a.split("=", 1) for a in assignments if "=" in a))
    return starts


def test_every_node_starts_ray_with_token_authentication(config):
    """The dashboard and job API listen on 0.0.0.0:8265: without a token anyone reaching it could submit a job that
    reads TESSERA_API_KEYS (cluster/README.md). ``ray start`` with RAY_AUTH_MODE=token reads ~/.ray/auth_token,
    which the file mounts put on every node, and refuses to start without it."""
    head, workers = ray_starts(config["head_start_ray_commands"]), ray_starts(config["worker_start_ray_commands"])
    assert len(head) == 1 and len(workers) == 1
    assert [env.get("RAY_AUTH_MODE") for env in head + workers] == ["token", "token"]
    assert "--env RAY_AUTH_MODE=token" in config["docker"]["run_options"], \
        "serve deploy and commands run on the nodes must send the token too"
    assert config["file_mounts"].get("~/.ray/auth_token") == "~/.ray/auth_token"


@pytest.mark.parametrize("breakage, reason", [
    ("unknown field", "'min_worker' was unexpected"),
    ("wrong type", "'one' is not of type 'integer'"),
    ("head not a node type", "must be one of `available_node_types`"),
    ("min above max", "smaller than the sum of `min_workers`"),
])
def test_a_broken_launcher_yaml_is_refused(config, ray_schema, breakage, reason):
    broken = copy.deepcopy(config)
    gpu = broken["available_node_types"]["worker.gpu"]
    if breakage == "unknown field":
        gpu["min_worker"] = 0
    elif breakage == "wrong type":
        gpu["resources"]["GPU"] = "one"
    elif breakage == "head not a node type":
        broken["head_node_type"] = "head"
    else:
        broken["available_node_types"]["worker.cpu"]["min_workers"] = broken["max_workers"] + 1
    with pytest.raises((jsonschema.ValidationError, ValueError), match=reason):
        jsonschema.validate(broken, ray_schema)
        ray_checks(broken)
