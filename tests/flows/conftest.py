"""Fixtures shared by the flow tests."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Iterator

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def committed_docnos() -> Callable[[Path], list[str]]:
    """A function: every committed chunk id of an index, sorted, with repeats (so a duplicate shows)."""
    import pyarrow.parquet as pq

    from operators.store import Index

    def docnos(index_path: Path) -> list[str]:
        found = []
        for shard in sorted(s.id for s in Index.open(index_path).manifest.shards):
            table = pq.read_table(index_path / "shards" / shard / "docs.parquet", columns=["docno"])
            found += table.column(0).to_pylist()
        return sorted(found)

    return docnos


@pytest.fixture
def run_cli(monkeypatch, capsys, tmp_path) -> Callable[..., tuple[int, str]]:
    """A function: ``tessera <args>`` in this process, from the repository root, with ``$TESSERA_HOME`` in
    ``tmp_path``; returns the exit status and what it printed."""
    from flows.commands import main

    def run(*args: str) -> tuple[int, str]:
        monkeypatch.chdir(Path(__file__).resolve().parents[2])
        monkeypatch.setenv("TESSERA_HOME", str(tmp_path))
        monkeypatch.setenv("COLUMNS", "160")
        capsys.readouterr()
        status = main(list(args))
        return status, capsys.readouterr().out

    return run



@contextlib.contextmanager
def app_args_checked_in_process() -> Iterator[None]:
    """Within it, ``tessera serve``'s check of its applications' ``args`` (``serve.check_args.first_problem``) runs in
    this process, on the config as JSON gives it to the child process the command starts (about 1 s of CPU each).
    tests/flows/test_serve_app_args.py checks through the real child process."""
    from flows.commands import serve as serve_command
    from serve.check_args import first_problem

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(serve_command, "app_args_problem",
                      lambda config: first_problem(json.loads(json.dumps(config, default=str))))
        yield


@pytest.fixture
def app_args_in_process() -> Iterator[None]:
    """``app_args_checked_in_process`` for one test."""
    with app_args_checked_in_process():
        yield


#: A job's runtime env as its entrypoint sees it after ``--runtime-env cluster/runtime_env.yaml`` (or ``--working-dir``)
#: uploaded the working directory; ``{}`` is a job submitted without one, run in the folder ``ray start`` ran in.
UPLOADED_RUNTIME_ENV = {"working_dir": "gcs://_ray_pkg_0123456789abcdef.zip"}


@pytest.fixture
def flows_run_in_job(monkeypatch, capsys, caplog) -> Callable[..., subprocess.CompletedProcess]:
    """A function: ``python -m flows.run ARGS`` as Ray's job supervisor starts an entrypoint (its job-config variable
    set to ``{"runtime_env": runtime_env}``, by default ``UPLOADED_RUNTIME_ENV``), from ``cwd`` with ``$TESSERA_HOME``
    at ``home``, answered as ``subprocess.run`` would. It runs in this process (``flows.commands.run.main``, what the
    module calls), without a process's second of imports; what it logs at WARNING or above is added to its stderr, as
    Python's last-resort handler prints it there in a process of its own. tests/flows/test_job_submit.py runs one in a
    real process."""
    import logging

    from flows.commands.run import main

    def run(*args: str, cwd: Path, home: Path, runtime_env: dict | None = None) -> subprocess.CompletedProcess:
        runtime_env = UPLOADED_RUNTIME_ENV if runtime_env is None else runtime_env
        with monkeypatch.context() as patch:
            patch.chdir(cwd)
            patch.setenv("TESSERA_HOME", str(home))
            patch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps({"runtime_env": runtime_env}))
            patch.delenv("TESSERA_DEBUG", raising=False)
            capsys.readouterr()
            caplog.clear()
            status = main(list(args))
            out = capsys.readouterr()
        logged = "".join(f"{r.getMessage()}\n" for r in caplog.records if r.levelno >= logging.WARNING)
        return subprocess.CompletedProcess(["python", "-m", "flows.run", *args], status, out.out, out.err + logged)

    return run

# -- a real local Ray cluster for job tests -----------------------------------------------------------------


@dataclass
class RayNode:
    """One ``ray start --block`` process (head or worker node) with its ports; stopped by PID."""

    proc: subprocess.Popen
    temp_dir: Path
    metrics_port: int
    log: Path

    def metrics(self) -> str:
        """The node's Prometheus export (its workers' series), or '' while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as response:
                return response.read().decode()
        except (urllib.error.URLError, OSError):
            return ""

    def series(self, name: str, **tags: str) -> list[float]:
        """The values of the exported samples called ``name`` whose labels include ``tags``."""
        from prometheus_client.parser import text_string_to_metric_families

        return [sample.value for family in text_string_to_metric_families(self.metrics()) for sample in family.samples
                if sample.name == name and tags.items() <= sample.labels.items()]

    def wait_for_series(self, name: str, timeout: float = 120, **tags: str) -> list[float]:
        """``series`` once some exist: workers' metrics reach the export port after a flush interval."""
        deadline = time.monotonic() + timeout
        while not (found := self.series(name, **tags)) and time.monotonic() < deadline:
            time.sleep(2)
        return found

    def raylet_pid(self) -> int:
        import psutil

        return next(p.pid for p in psutil.Process(self.proc.pid).children(recursive=True) if p.name() == "raylet")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # --block: the node stops every Ray process it started
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class RayHead:
    address: str  # the job server (dashboard), http://127.0.0.1:PORT
    env: dict[str, str]  # what a shell on this machine would have: PATH with `ray` and `python`, the token path
    token: str
    temp_dir: Path
    gcs: str  # 127.0.0.1:PORT, what `ray start --address` joins
    node: RayNode

    def client(self):
        from ray.job_submission import JobSubmissionClient

        return JobSubmissionClient(self.address, headers={"Authorization": f"Bearer {self.token}"})

    def job_logs(self) -> dict[str, tuple[str, str]]:
        """Every job on the head: ``{submission id: (status, logs)}``."""
        client = self.client()
        return {job.submission_id: (str(job.status), client.get_job_logs(job.submission_id))
                for job in client.list_jobs()}

    def submit(self, entrypoint: str, working_dir: Path, **env: str) -> str:
        """Submit ``entrypoint`` with the repository's cluster/runtime_env.yaml excludes, from ``working_dir``."""
        import yaml

        runtime_env = yaml.safe_load((REPO / "cluster" / "runtime_env.yaml").read_text())
        runtime_env["working_dir"] = str(working_dir)
        if env:
            runtime_env["env_vars"] = env
        deadline = time.monotonic() + 120
        while True:
            try:
                return self.client().submit_job(entrypoint=entrypoint, runtime_env=runtime_env)
            except RuntimeError as err:  # the dashboard answers before its node's agent takes jobs
                if "No available agent" not in str(err) or time.monotonic() > deadline:
                    raise
                time.sleep(2)

    def wait(self, job_id: str, timeout: float = 500) -> tuple[str, str]:
        """Poll the job until it ends: its final status and logs."""
        client = self.client()
        deadline = time.monotonic() + timeout
        while not client.get_job_status(job_id).is_terminal():
            if time.monotonic() > deadline:
                client.stop_job(job_id)
                pytest.fail(f"job {job_id} did not end in {timeout:.0f} s:\n{client.get_job_logs(job_id)[-3000:]}")
            time.sleep(1)
        return str(client.get_job_status(job_id)), client.get_job_logs(job_id)


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def end_group(process: subprocess.Popen) -> None:
    """Kill ``process`` (started with ``start_new_session=True``) if it still runs, then whatever of its process
    group is left (the Ray a ``tessera serve`` started): by the group this test made, never by a name."""
    if process.poll() is None:
        process.kill()
        process.wait(30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def wait_until_answering(process: subprocess.Popen, url: str, log: Path, timeout_s: float = 240) -> None:
    """Until ``url`` answers 200 (a ``tessera serve`` started as ``process``, writing ``log``); fails with the log's
    end when the process exits or ``timeout_s`` passes first."""
    import requests

    deadline = time.monotonic() + timeout_s
    while True:
        assert process.poll() is None, log.read_text()[-3000:]
        try:
            if requests.get(url, timeout=5).status_code == 200:
                return
        except requests.RequestException:
            pass
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(1)


def venv_path(folder: Path) -> str:
    """``PATH`` as in an activated venv: this interpreter's ``python`` and ``ray`` first (a ``ray`` shim in
    ``folder`` when the venv has no ``ray`` script of its own)."""
    here = Path(sys.executable).parent
    found = [here]
    if not (here / "ray").is_file():
        folder.mkdir(exist_ok=True)
        (folder / "ray").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ray.scripts.scripts "$@"\n')
        (folder / "ray").chmod(0o755)
        found.append(folder)
    return os.pathsep.join([*map(str, found), os.environ["PATH"]])


def _start_node(args: list[str], env: dict[str, str], temp: Path, name: str) -> RayNode:
    """``ray start --block ARGS`` on free ports of its own, logging to ``temp/NAME.log``."""
    node, objects, agent, agent_grpc, runtime_env, metrics = free_ports(6)
    cmd = ["ray", "start", "--block", *args, "--temp-dir", str(temp), "--disable-usage-stats",
           "--node-manager-port", str(node), "--object-manager-port", str(objects),
           "--dashboard-agent-listen-port", str(agent), "--dashboard-agent-grpc-port", str(agent_grpc),
           "--runtime-env-agent-port", str(runtime_env), "--metrics-export-port", str(metrics)]
    log = temp / f"{name}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return RayNode(proc, temp, metrics, log)


def _answers(address: str, token: str) -> bool:
    request = urllib.request.Request(f"{address}/api/version", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def launch_head(home: Path, num_cpus: int = 2) -> Iterator[RayHead]:
    """A Ray head (``ray start --head --block``) on free ports with its own temp dir, under Ray's default
    authentication (a token exists, so ``ray start`` turns token auth on); stopped by its PID (SIGTERM)."""
    temp = Path(tempfile.mkdtemp(prefix="tsr", dir="/tmp"))  # short: Ray's socket paths have a length limit
    token = secrets.token_hex(32)
    (temp / "token").write_text(token)
    env = {**os.environ, "PATH": venv_path(temp / "bin"), "RAY_AUTH_TOKEN_PATH": str(temp / "token"),
           "TESSERA_HOME": str(home), "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0",  # SIGTERM stops it at once
           "RAY_metrics_report_interval_ms": "1000",  # workers' metrics reach the export port within seconds
           "RAY_enable_metrics_collection": "1"}  # on for these clusters, whose tests read them (off for the others)
    for name in ("RAY_AUTH_MODE", "RAY_ADDRESS", "TESSERA_DEBUG"):
        env.pop(name, None)  # Ray's default authentication: on, because a token exists
    gcs, dash, client = free_ports(3)
    node = _start_node(["--head", "--num-cpus", str(num_cpus), "--port", str(gcs), "--dashboard-host", "127.0.0.1",
                        "--dashboard-port", str(dash), "--ray-client-server-port", str(client)], env, temp, "head")
    head = RayHead(f"http://127.0.0.1:{dash}", env, token, temp, f"127.0.0.1:{gcs}", node)
    try:
        deadline = time.monotonic() + 180
        while not _answers(head.address, token):
            if node.proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Ray head did not start:\n{node.log.read_text()[-3000:]}")
            time.sleep(1)
        yield head
    finally:
        node.stop()
        shutil.rmtree(temp, ignore_errors=True)


@contextlib.contextmanager
def join_node(head: RayHead, name: str, num_cpus: int = 1, **env_vars: str) -> Iterator[RayNode]:
    """A second node on this machine (``ray start --address=HEAD``) with a custom resource ``NAME`` and its
    own temp dir; returns once it has registered with the head. Started again (three tries) when ``ray start`` gives up:
    it waits 30 s at most for its raylet to register, which a loaded 2-core machine can exceed. ``env_vars`` change
    the node's environment (``TESSERA_HOME``: a node of another machine)."""
    temp = Path(tempfile.mkdtemp(prefix="tsn", dir="/tmp"))
    # a joining node turns token auth on only when told (docs/cluster.md)
    env = {**head.env, "RAY_AUTH_MODE": "token", **env_vars}
    args = ["--address", head.gcs, "--num-cpus", str(num_cpus), "--resources", json.dumps({name: 1})]
    node = None
    try:
        for attempt in range(3):
            node = _start_node(args, env, temp, f"{name}-{attempt}")
            deadline = time.monotonic() + 180
            while "Ray runtime started" not in node.log.read_text(errors="replace"):  # registered with the head
                if node.proc.poll() is not None or time.monotonic() > deadline:
                    break
                time.sleep(1)
            else:
                break
            node.stop()
        else:
            pytest.fail(f"the Ray node {name} did not join:\n{node.log.read_text()[-3000:]}")
        yield node
    finally:
        if node is not None:
            node.stop()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_cluster_tools():
    """``launch_head`` and ``join_node`` for a module's own cluster fixture (a conftest is not importable)."""
    return SimpleNamespace(launch_head=launch_head, join_node=join_node)


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory) -> Iterator[RayHead]:
    """One real local Ray head (2 CPUs) for a module's job tests."""
    with launch_head(tmp_path_factory.mktemp("home")) as head:
        yield head


def service_only_config(path: Path) -> tuple[Path, int]:
    """A ``tessera serve`` config at ``path`` with the flow service alone (no model, no default index, no spare
    worker: quick to start) on a free port of 127.0.0.1; the path and the port."""
    import yaml

    port = free_ports(1)[0]
    service = {"default_index": None, "spare_task_workers": 0}
    path.write_text(yaml.safe_dump({
        "proxy_location": "HeadOnly", "http_options": {"host": "127.0.0.1", "port": port},
        "applications": [{"name": "tessera", "route_prefix": "/", "import_path": "serve.app:build_app",
                          "args": {"models": [], "llms": [], "service": service}}]}))
    return path, port


@pytest.fixture(scope="module")
def bm25_index(tmp_path_factory) -> Path:
    """The first 40 sample documents, ingested by ``flows.api.ingest`` as a notebook does (chunked), BM25 only."""
    from flows.api import ingest
    from operators.testing import sample_documents

    root = tmp_path_factory.mktemp("api")
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d["docno"], "title": d["title"], "text": d["text"]}) + "\n"
                              for d in sample_documents(40).to_pylist()), encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TESSERA_HOME", str(root / "home"))
        ingest(corpus, root / "idx", settings={"dense": False}, progress=False)
    return root / "idx"


def node_ip() -> str:
    """The address Ray dials for 127.0.0.1: this node's IP. A stand-in for a cluster binds there, and no wider."""
    from ray._private.services import resolve_ip_for_localhost

    return resolve_ip_for_localhost("127.0.0.1")


@contextlib.contextmanager
def gcs_stand_in_at(gcs: bool = True, refuse: bool = False) -> Iterator[SimpleNamespace]:
    """A gRPC server on ``node_ip()``; ``gcs``: it answers ``GetClusterId`` as a Ray GCS does, counting the
    questions (``asked``), else it serves nothing (every call ``UNIMPLEMENTED``). ``refuse``: as a GCS with token
    authentication answers a process that sent no token."""
    from concurrent import futures

    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    state = SimpleNamespace(asked=0)

    class ClusterIds(gcs_service_pb2_grpc.NodeInfoGcsServiceServicer):
        def GetClusterId(self, request, context):
            state.asked += 1
            if refuse:
                context.abort(grpc.StatusCode.UNAUTHENTICATED,
                              "InvalidAuthToken: Authentication token is missing or incorrect")
            return gcs_service_pb2.GetClusterIdReply(cluster_id=b"\x01" * 28)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    if gcs:
        gcs_service_pb2_grpc.add_NodeInfoGcsServiceServicer_to_server(ClusterIds(), server)
    state.port = server.add_insecure_port(f"{node_ip()}:0")
    state.address = f"127.0.0.1:{state.port}"
    server.start()
    try:
        yield state
    finally:
        server.stop(grace=None)


@pytest.fixture(scope="session")
def gcs_stand_in():
    """``gcs_stand_in_at``: a gRPC server that answers the question ``tessera`` asks a cluster's address before it
    joins (flows/executors/ray_address.py), where a test needs the check to pass (or be refused) without Ray."""
    return gcs_stand_in_at


@pytest.fixture(scope="session")
def ray_dials() -> str:
    """``node_ip()``: where a listener that stands at a Ray address must bind to be reached."""
    return node_ip()
