"""The README's ``ray job submit`` command, run as written against a real local Ray head; paths in a job.

The head is ``ray start --head --block`` on free ports with its own temp dir, under Ray's
default authentication (a token exists, so ``ray start`` turns token auth on), and is
stopped by its PID (SIGTERM: ``--block`` then stops every process it started).
"""

from __future__ import annotations

import os
import re
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

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def readme_job_lines() -> tuple[str, str]:
    """The README's job block: its ``export RAY_AUTH_MODE`` line and its ``ray job submit`` command."""
    block = next(b for b in re.findall(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
                 if "ray job submit" in b)
    export = next(line.split("#")[0].strip() for line in block.splitlines() if line.startswith("export RAY_AUTH"))
    submit = block[block.index("ray job submit"):].strip()
    return export, submit


# -- in a job, without a cluster: the checks before anything runs ------------------------------------------


def run_in_job(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess:
    """``python -m flows.run ...`` as Ray's job supervisor starts an entrypoint (its job-config variable set)."""
    env = {**os.environ, "TESSERA_HOME": str(home), "RAY_JOB_CONFIG_JSON_ENV_VAR": "{}"}
    env.pop("TESSERA_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "flows.run", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_in_a_job_a_relative_out_is_refused_before_anything_runs(tmp_path):
    proc = run_in_job("demo", "--index", str(tmp_path / "nowhere"), "--queries", "honey bees", "--out",
                      "results.parquet", cwd=REPO, home=tmp_path / "home")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "--out 'results.parquet' is relative" in lines[0] and '--out "$PWD/results.parquet"' in lines[0]
    assert not (REPO / "results.parquet").exists()


def test_in_a_job_a_git_ignored_index_is_one_line_that_says_why(tmp_path):
    proc = run_in_job("demo", "--index", ".tessera/indices/sample", "--queries", "data/sample/queries.jsonl",
                      cwd=REPO, home=tmp_path / "home")
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "--index '.tessera/indices/sample' is not in this Ray job's copy of the working directory" in lines[0]
    assert "git-ignored" in lines[0] and '--index "$PWD/.tessera/indices/sample"' in lines[0]


# -- a real local head ----------------------------------------------------------------------------------------


@dataclass
class RayHead:
    address: str  # the job server (dashboard), http://127.0.0.1:PORT
    env: dict[str, str]  # what a shell on this machine would have: PATH with `ray` and `python`, the token path
    token: str
    temp_dir: Path


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def venv_path(folder: Path) -> str:
    """``PATH`` as in an activated venv: this interpreter's ``python`` and ``ray`` first (a ``ray`` shim in
    ``folder`` when the venv has no ``ray`` script of its own)."""
    here = Path(sys.executable).parent
    found = [here]
    if not (here / "ray").is_file():
        folder.mkdir()
        (folder / "ray").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m ray.scripts.scripts "$@"\n')
        (folder / "ray").chmod(0o755)
        found.append(folder)
    return os.pathsep.join([*map(str, found), os.environ["PATH"]])


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    temp = Path(tempfile.mkdtemp(prefix="tsr", dir="/tmp"))  # short: Ray's socket paths have a length limit
    token = secrets.token_hex(32)
    (temp / "token").write_text(token)
    env = {**os.environ, "PATH": venv_path(temp / "bin"),
           "RAY_AUTH_TOKEN_PATH": str(temp / "token"), "TESSERA_HOME": str(tmp_path_factory.mktemp("home")),
           "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}  # SIGTERM stops the head at once
    for name in ("RAY_AUTH_MODE", "RAY_ADDRESS", "TESSERA_DEBUG"):
        env.pop(name, None)  # Ray's default authentication: on, because a token exists
    gcs, dash, client, node, objects, agent, agent_grpc, runtime_env, metrics = free_ports(9)
    cmd = ["ray", "start", "--head", "--block", "--num-cpus", "2", "--temp-dir", str(temp), "--disable-usage-stats",
           "--port", str(gcs), "--dashboard-host", "127.0.0.1", "--dashboard-port", str(dash),
           "--ray-client-server-port", str(client), "--node-manager-port", str(node),
           "--object-manager-port", str(objects), "--dashboard-agent-listen-port", str(agent),
           "--dashboard-agent-grpc-port", str(agent_grpc), "--runtime-env-agent-port", str(runtime_env),
           "--metrics-export-port", str(metrics)]
    log = open(temp / "head.log", "w")
    head = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    address = f"http://127.0.0.1:{dash}"
    try:
        deadline = time.monotonic() + 180
        while not _answers(address, token):
            if head.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the Ray head did not start:\n{(temp / 'head.log').read_text()[-3000:]}")
            time.sleep(1)
        yield RayHead(address, env, token, temp)
    finally:
        head.send_signal(signal.SIGTERM)  # --block: the head stops every Ray process it started
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def _answers(address: str, token: str) -> bool:
    request = urllib.request.Request(f"{address}/api/version", headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def clone_after_make_demo(root: Path, sample_index: Path) -> Path:
    """The repository's files (tracked, and new ones git does not ignore) with ``make demo``'s index and a venv
    folder in place: what a user's clone holds when they submit."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True,
                            check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, root / name)
    (root / ".tessera" / "indices").mkdir(parents=True)
    (root / ".tessera" / "indices" / "sample").symlink_to(sample_index)
    (root / ".venv" / "lib").mkdir(parents=True)
    (root / ".venv" / "lib" / "big.bin").write_bytes(b"\0" * 1024)
    return root


def job_logs(head: RayHead) -> dict[str, tuple[str, str]]:
    """Every job on the head: ``{submission id: (status, logs)}``."""
    from ray.job_submission import JobSubmissionClient

    client = JobSubmissionClient(head.address, headers={"Authorization": f"Bearer {head.token}"})
    return {job.submission_id: (str(job.status), client.get_job_logs(job.submission_id))
            for job in client.list_jobs()}


@pytest.mark.ray
@pytest.mark.slow
def test_the_readme_job_command_runs_as_written_on_a_local_cluster(ray_head, sample_index, tmp_path):
    clone = clone_after_make_demo(tmp_path / "clone", sample_index)
    export, submit = readme_job_lines()
    env = {**ray_head.env, "RAY_ADDRESS": ray_head.address}

    def shell(script: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True,
                              timeout=540)

    # Without the README's export the job server refuses the client: authentication is on.
    refused = shell(submit)
    assert refused.returncode != 0 and "Authentication required" in refused.stdout + refused.stderr
    # As written.
    done = shell(f"{export}\n{submit}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (job_id, (status, logs)), = job_logs(ray_head).items()
    assert status == "SUCCEEDED" and job_id in done.stdout + done.stderr
    assert "[1/11] bm25 (retrieve.bm25) done, 80 rows" in logs and "[11/11] terms (analyze.word_count) done" in logs
    assert f"wrote 20 rows to {clone}/results.parquet" in logs and "Token authentication" not in logs
    results = pq.read_table(clone / "results.parquet")
    assert results.num_rows == 20 and sorted(set(results.column("qid").to_pylist())) == ["q1", "q2", "q3", "q4"]
    # What went up: the code and data/sample, not the venv nor .tessera/.
    package, = (p for p in (ray_head.temp_dir / "session_latest" / "runtime_resources" / "working_dir_files").iterdir()
                if p.is_dir())
    assert (package / "flows" / "commands" / "run.py").is_file() and (package / "data" / "sample").is_dir()
    assert not (package / ".venv").exists() and not (package / ".tessera").exists()

    # The index as a relative path was never uploaded: one line that says so, before Ray Data starts.
    relative = submit.replace('"$PWD/.tessera/indices/sample"', ".tessera/indices/sample")
    failed = shell(f"{export}\n{relative}")
    assert failed.returncode != 0
    status, logs = next(v for k, v in job_logs(ray_head).items() if k != job_id)
    errors = [line for line in logs.splitlines() if line.startswith("tessera: ")]
    assert status == "FAILED" and "Traceback" not in logs and len(errors) == 1, logs
    assert "git-ignored" in errors[0] and "core_worker" not in logs
