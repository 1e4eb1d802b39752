"""No SQLite database in WAL mode on a volume several hosts share (docs/cluster.md: WAL needs one host; NFS, EFS or a
ReadWriteMany volume corrupts it): the step cache (``--cache-dir``, else ``$TESSERA_HOME/cache``) of every job the
cluster files start, and the task store (``args.service.task_store``, else ``$TESSERA_HOME/tasks.db``) of every Serve
config they deploy. ``$TESSERA_HOME`` is what each pod or container gets: its env, else cluster/Dockerfile's."""

from __future__ import annotations

import copy
import re
import shlex
from pathlib import Path, PurePosixPath

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "cluster"
KUBERAY = CLUSTER / "kuberay"
CACHING_JOBS = ("flows.run", "flows.bench")  # the entry points that open a step cache (unless --no-cache)


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def image_home() -> str:
    found = re.findall(r"^ENV TESSERA_HOME=(\S+)", (CLUSTER / "Dockerfile").read_text(encoding="utf-8"), re.M)
    assert len(found) == 1
    return found[0]


def cluster_spec(doc: dict) -> dict:
    return doc["spec"].get("rayClusterConfig") or doc["spec"]["rayClusterSpec"]


def pods(doc: dict) -> list[dict]:
    spec = cluster_spec(doc)
    return [spec["headGroupSpec"]["template"]["spec"], *(g["template"]["spec"] for g in spec["workerGroupSpecs"])]


def shared_mounts(doc: dict) -> list[str]:
    """Where the manifest's pods mount a PersistentVolumeClaim (the volume every pod shares)."""
    found = []
    for pod in pods(doc):
        claims = {v["name"] for v in pod.get("volumes", []) if "persistentVolumeClaim" in v}
        found += [m["mountPath"] for c in pod["containers"] for m in c.get("volumeMounts", []) if m["name"] in claims]
    return sorted(set(found))


def homes(doc: dict) -> list[str]:
    """``$TESSERA_HOME`` of every container of the manifest (its env, else the image's)."""
    found = []
    for pod in pods(doc):
        for container in pod["containers"]:
            env = {e["name"]: e.get("value") for e in container.get("env", [])}
            found.append(env.get("TESSERA_HOME") or image_home())
    return found


def inside(path: str, mounts: list[str]) -> bool:
    return any(PurePosixPath(path).is_relative_to(mount) for mount in mounts)


def sqlite_path(url: str) -> str | None:
    """The file of a ``sqlite:///`` URL (four slashes: absolute), None for another database."""
    return url.removeprefix("sqlite:///") if url.startswith("sqlite:") else None


def task_store_paths(serve_config: dict, home: str) -> list[str]:
    """The SQLite file of each application's task store (the default: ``$TESSERA_HOME/tasks.db``)."""
    found = []
    for app in serve_config["applications"]:
        service = (app.get("args") or {}).get("service", {})
        if service is None:
            continue
        url = service.get("task_store") or f"sqlite:///{home}/tasks.db"
        if (path := sqlite_path(url)) is not None:
            found.append(path)
    return found


def step_cache_paths(entrypoint: str, home: str, parse_entrypoint) -> list[str]:
    module, args = parse_entrypoint(entrypoint)
    if module not in CACHING_JOBS or getattr(args, "no_cache", False):
        return []
    return [f"{getattr(args, 'cache_dir', None) or home + '/cache'}/index.sqlite"]


def wal_databases(name: str, doc: dict, parse_entrypoint) -> list[str]:
    """Every WAL-mode SQLite file a KubeRay manifest makes some pod open, for each pod's ``$TESSERA_HOME``."""
    found = []
    for home in homes(doc):
        if doc["kind"] == "RayService":
            found += task_store_paths(yaml.safe_load(doc["spec"]["serveConfigV2"]), home)
        else:
            found += step_cache_paths(doc["spec"]["entrypoint"], home, parse_entrypoint)
    return found


@pytest.mark.parametrize("name", ["rayservice.yaml", "rayjob-ingest.yaml", "rayjob-bench.yaml"])
def test_no_kuberay_pod_opens_a_wal_database_on_the_shared_volume(name, parse_entrypoint):
    doc = load(KUBERAY / name)
    mounts = shared_mounts(doc)
    assert mounts == ["/mnt/tessera"]
    on_volume = [p for p in wal_databases(name, doc, parse_entrypoint) if inside(p, mounts)]
    assert on_volume == [], f"{name}: SQLite in WAL mode on the shared volume"


def test_the_launchers_serve_config_keeps_its_task_store_off_the_shared_volume():
    launcher = load(CLUSTER / "ray-cluster-aws.yaml")
    options = [shlex.split(o) for o in launcher["docker"]["run_options"]]
    mounts = [o[1].split(":")[1] for o in options if o[0] == "--volume"]
    env = dict(o[1].split("=", 1) for o in options if o[0] == "--env")
    assert mounts == ["/mnt/tessera"] and env["TESSERA_HOME"] == "/mnt/tessera"
    paths = task_store_paths(load(CLUSTER / "serve-gpu.yaml"), env["TESSERA_HOME"])
    assert not [p for p in paths if inside(p, mounts)]


def test_no_sqlite_url_in_the_cluster_files_names_the_shared_volume():
    texts = {p.name: p.read_text(encoding="utf-8") for p in CLUSTER.rglob("*") if p.is_file()}
    urls = {name: re.findall(r"sqlite:///+\S+", text) for name, text in texts.items()}
    assert not {name: found for name, found in urls.items() if any("/mnt/tessera" in u for u in found)}


@pytest.mark.parametrize("breakage", ["task store on the volume", "default task store", "bench cache on the volume"])
def test_a_wal_database_on_the_shared_volume_is_caught(breakage, parse_entrypoint):
    name = "rayjob-bench.yaml" if breakage.startswith("bench") else "rayservice.yaml"
    doc = copy.deepcopy(load(KUBERAY / name))
    if name == "rayservice.yaml":
        config = yaml.safe_load(doc["spec"]["serveConfigV2"])
        service = config["applications"][0]["args"]["service"]
        if breakage == "default task store":
            del service["task_store"]  # $TESSERA_HOME/tasks.db, and the image's TESSERA_HOME is the volume
        else:
            service["task_store"] = "sqlite:////mnt/tessera/tasks.db"
        doc["spec"]["serveConfigV2"] = yaml.safe_dump(config)
    else:
        for pod in pods(doc):
            for container in pod["containers"]:
                container.pop("env", None)  # the image's TESSERA_HOME: the volume
    assert any(inside(p, ["/mnt/tessera"]) for p in wal_databases(name, doc, parse_entrypoint))
