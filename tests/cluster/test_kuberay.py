"""cluster/kuberay/*.yaml against KubeRay's CRD schemas (../shared/kuberay, unknown fields refused), and what
they refer to: GPU pods for the GPU group, the shared volume, the job entry points and their flags."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
KUBERAY = REPO / "cluster" / "kuberay"
MANIFESTS = {"rayservice.yaml": "rayservices", "rayjob-ingest.yaml": "rayjobs", "rayjob-bench.yaml": "rayjobs"}
JOB_OUTPUTS = {"flows.ingest": ("index",), "flows.bench": ("out", "index_dir")}
IMAGE_CLONE = "/home/ray/tessera/"  # where cluster/Dockerfile copies the clone


def manifest(name: str) -> dict:
    return yaml.safe_load((KUBERAY / name).read_text(encoding="utf-8"))


def cluster_spec(doc: dict) -> dict:
    return doc["spec"].get("rayClusterConfig") or doc["spec"]["rayClusterSpec"]


def pod_specs(doc: dict) -> list[dict]:
    spec = cluster_spec(doc)
    return [spec["headGroupSpec"]["template"]["spec"], *(g["template"]["spec"] for g in spec["workerGroupSpecs"])]


def test_every_manifest_is_checked():
    assert sorted(p.name for p in KUBERAY.glob("*.yaml")) == sorted(MANIFESTS)


@pytest.mark.parametrize("name", MANIFESTS)
def test_the_manifest_validates_against_kuberays_crd(name, crd_validator, schema_errors):
    doc = manifest(name)
    assert doc["apiVersion"] == "ray.io/v1"
    assert doc["kind"] == {"rayservices": "RayService", "rayjobs": "RayJob"}[MANIFESTS[name]]
    assert schema_errors(crd_validator(MANIFESTS[name]), doc) == []


@pytest.mark.parametrize("name", MANIFESTS)
def test_every_pod_mounts_the_shared_volume(name):
    for pod in pod_specs(manifest(name)):
        claims = {v["name"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
        mounts = {m["name"]: m["mountPath"] for c in pod["containers"] for m in c["volumeMounts"]}
        assert claims and all(mounts.get(claim) == "/mnt/tessera" for claim in claims)


def test_the_rayservice_scales_a_gpu_group_from_zero():
    spec = cluster_spec(manifest("rayservice.yaml"))
    assert spec["enableInTreeAutoscaling"] is True
    gpu = [g for g in spec["workerGroupSpecs"]
           if any("nvidia.com/gpu" in c["resources"]["limits"] for c in g["template"]["spec"]["containers"])]
    assert len(gpu) == 1 and gpu[0]["minReplicas"] == 0 and gpu[0]["maxReplicas"] > 0
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in head["resources"]["limits"]
    keys = [e for e in head["env"] if e["name"] == "TESSERA_API_KEYS"]
    assert keys and "secretKeyRef" in keys[0]["valueFrom"], "the app listens on 0.0.0.0: it needs its API keys"


#: The node label GPU Feature Discovery puts on a node, by the accelerator type Ray names.
GPU_PRODUCTS = {"A10G": "NVIDIA-A10G", "L4": "NVIDIA-L4", "A100": "NVIDIA-A100-SXM4-80GB"}


def offered_resources(doc: dict) -> dict[str, dict]:
    """Each group's resources as KubeRay's autoscaler reads them (Ray's own code: containers' limits and
    ``rayStartParams.resources``): what it believes a new pod of that group would offer."""
    from ray.autoscaler._private.kuberay.autoscaling_config import _derive_autoscaling_config_from_ray_cr

    config = _derive_autoscaling_config_from_ray_cr({"metadata": {"name": "tessera", "namespace": "default"},
                                                     "spec": cluster_spec(doc)})
    return {name: node["resources"] for name, node in config["available_node_types"].items()}


def test_every_accelerator_type_a_served_model_asks_for_is_offered_by_a_group():
    doc = manifest("rayservice.yaml")
    args = yaml.safe_load(doc["spec"]["serveConfigV2"])["applications"][0]["args"]
    asked = {m["accelerator_type"] for m in [*args["models"], *args["llms"]] if m.get("accelerator_type")}
    assert asked, "the vLLM model names its accelerator (checked here)"
    offered = offered_resources(doc)
    groups = {g["groupName"]: g for g in cluster_spec(doc)["workerGroupSpecs"]}
    for accelerator in asked:
        # ray.serve.llm adds `accelerator_type:X: 0.001` to the replica's bundle; only a group the autoscaler
        # knows to offer it (and a GPU) is ever scaled up for it.
        offering = [name for name, resources in offered.items()
                    if resources.get(f"accelerator_type:{accelerator}", 0) >= 0.001 and resources.get("GPU", 0) >= 1]
        assert offering, f"no group offers accelerator_type:{accelerator}: its replicas would wait forever"
        for name in offering:  # and its pods land on nodes that have that GPU
            selector = groups[name]["template"]["spec"].get("nodeSelector", {})
            assert selector.get("nvidia.com/gpu.product") == GPU_PRODUCTS[accelerator], name


def test_an_accelerator_no_group_offers_is_caught():
    doc = copy.deepcopy(manifest("rayservice.yaml"))
    for group in cluster_spec(doc)["workerGroupSpecs"]:
        group["rayStartParams"].pop("resources", None)
    assert not any(k.startswith("accelerator_type:") for r in offered_resources(doc).values() for k in r)


def test_the_rayservice_uses_no_deprecated_thresholds():
    spec = manifest("rayservice.yaml")["spec"]  # unused by KubeRay since v1.1 (kuberay#1685): no protection
    assert not {"serviceUnhealthySecondThreshold", "deploymentUnhealthySecondThreshold"} & set(spec)
    assert "UnhealthySecondThreshold" not in (KUBERAY / "rayservice.yaml").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["rayjob-ingest.yaml", "rayjob-bench.yaml"])
def test_the_job_entry_point_parses_with_tesseras_parser(name, parse_entrypoint):
    module, args = parse_entrypoint(manifest(name)["spec"]["entrypoint"])
    assert module in JOB_OUTPUTS
    for option in JOB_OUTPUTS[module]:
        assert Path(getattr(args, option)).is_absolute(), f"--{option} must be a path every pod can reach"
    assert f"WORKDIR {IMAGE_CLONE.rstrip('/')}" in (REPO / "cluster" / "Dockerfile").read_text(encoding="utf-8")
    for value in (getattr(args, "source", None), getattr(args, "dataset", None)):
        if value and value.startswith(IMAGE_CLONE):
            assert (REPO / value.removeprefix(IMAGE_CLONE)).exists(), f"{value} is not in the image"
    if module == "flows.bench":
        from flows.bench.flowdefs import resolve_flows

        assert args.executor == "ray" and len(resolve_flows(args.flows)) >= 2


@pytest.mark.parametrize("breakage, reason", [
    ("misspelt field", "'workerGroupSpec' was unexpected"),
    ("wrong type", "'two' is not of type 'integer'"),
    ("missing required", "'groupName' is a required property"),
])
def test_a_broken_manifest_is_refused(breakage, reason, crd_validator, schema_errors):
    doc = copy.deepcopy(manifest("rayservice.yaml"))
    spec = cluster_spec(doc)
    if breakage == "misspelt field":
        spec["workerGroupSpec"] = spec.pop("workerGroupSpecs")
    elif breakage == "wrong type":
        spec["workerGroupSpecs"][0]["maxReplicas"] = "two"
    else:
        del spec["workerGroupSpecs"][1]["groupName"]
    errors = schema_errors(crd_validator("rayservices"), doc)
    assert any(reason in e for e in errors), errors


@pytest.mark.parametrize("entrypoint, reason", [
    ("python -m flows.ingest --source /c.jsonl --index /i --shard-sise 250", "unrecognized arguments: --shard-sise"),
    ("python -m flows.bench --dataset /d --out /o", "the following arguments are required: --flow"),
    ("python -m flows.injest --index /i", "flows.injest has no __main__"),
])
def test_a_broken_entry_point_is_refused(entrypoint, reason, parse_entrypoint):
    with pytest.raises(ValueError, match=reason):
        parse_entrypoint(entrypoint)


def test_worker_pods_are_ready_only_when_tesseras_healthz_is():
    """KubeRay's default probes hit Serve's /-/healthz, 200 whatever the app's state: the workers' readiness adds
    Tessera's /healthz (models, task store, TESSERA_HOME), so tessera-serve-svc sends them nothing before. The head
    keeps KubeRay's defaults (KubeRay submits the Serve config only once the head is ready)."""
    spec = cluster_spec(manifest("rayservice.yaml"))
    head = spec["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert "readinessProbe" not in head and "livenessProbe" not in head
    for group in spec["workerGroupSpecs"]:
        (worker,) = group["template"]["spec"]["containers"]
        command = " ".join(worker["readinessProbe"]["exec"]["command"])
        assert "http://localhost:8000/healthz" in command, group["groupName"]
        assert "local_raylet_healthz" in command and "http://localhost:8000/-/healthz" in command  # KubeRay's own
        assert "livenessProbe" not in worker  # KubeRay's default: a Pod is not restarted while models load


#: Seconds ``ray start --block`` needs after its drain wait to end Ray's processes (each gets a SIGTERM and a moment
#: before a SIGKILL), within the Pod's grace period.
RAY_TEARDOWN_S = 10


def ray_default(module: str, name: str) -> float:
    """The default of a ``NAME = env_float("RAY_...", DEFAULT)`` in Ray's ``module`` (a path under ``ray/``), read
    from the installed file: what a node gets when its environment does not set it (an import would read this
    process's environment; importing ``ray.serve`` takes seconds)."""
    import ast
    import importlib.util

    source = Path(importlib.util.find_spec("ray").submodule_search_locations[0]) / module
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return float(ast.literal_eval(node.value.args[1]))
    raise LookupError(f"{name} is not in {source}")


def test_a_deleted_pod_ends_ray_before_kubernetes_kills_it():
    """A deleted Pod's SIGTERM reaches ``ray start --block``, which (Ray 2.60) marks the node draining and waits up to
    ``RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S`` before it ends Ray. Ray's default, 30 s, is the Pod's default
    ``terminationGracePeriodSeconds``: Kubernetes' SIGKILL came before Ray's own shutdown. The wait must end within the
    grace period with room for that shutdown, and on a serving worker outlast Serve's proxy drain (its /-/healthz 503
    for at least ``PROXY_MIN_DRAINING_PERIOD_S``), so a drained node can end before its deadline."""
    ray_drain_s = ray_default("_private/ray_constants.py", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S")
    proxy_drain_s = ray_default("serve/_private/constants.py", "PROXY_MIN_DRAINING_PERIOD_S")
    spec = cluster_spec(manifest("rayservice.yaml"))
    groups = [("head", spec["headGroupSpec"]), *((g["groupName"], g) for g in spec["workerGroupSpecs"])]
    for name, group in groups:
        pod = group["template"]["spec"]
        grace = pod.get("terminationGracePeriodSeconds", 30)  # Kubernetes' default
        (container,) = pod["containers"]
        env = {e["name"]: e.get("value") for e in container.get("env", [])}
        drain = float(env.get("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S", ray_drain_s))
        assert drain + RAY_TEARDOWN_S <= grace, f"{name}: a {drain:g} s drain in a {grace} s grace period"
        if name != "head":  # Serve never drains the head's proxy
            assert drain > proxy_drain_s, name


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_every_cluster_asks_for_rays_token_authentication(name):
    """Without it the head's job API (dashboard-host 0.0.0.0) took a job from anyone who reached it, and the pods'
    environment holds the API keys and the task store's password."""
    assert cluster_spec(manifest(name)).get("authOptions") == {"mode": "token"}
