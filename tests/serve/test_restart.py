"""Tasks survive the service: ``tessera serve`` started for real (its own Ray), two tasks running on Ray and one
finished, the service killed with SIGKILL, started again on the same task store. Every task is still readable;
the finished one kept its result; the ones that were running reached ``failed`` with the reason ``interrupted``,
with counters that add up; none stays running, and their step work ended with the service. An upload whose
ingestion was cut short is failed the same way, and its uploaded file is removed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml

pytestmark = [pytest.mark.ray, pytest.mark.slow]

QUERY = "which insects make honey and pollinate flowers"
#: An upload whose ingestion outlasts the slow tasks' start (400 documents of 450 word pieces, 1,200 passages to
#: embed): 800 KB, under max_body_bytes.
DOCUMENTS = [{"id": f"d{i}", "text": f"Document {i} of an upload that the service's death cuts short. " * 30}
             for i in range(400)]


def group_pids(pgid: int) -> list[int]:
    """Processes of the process group ``pgid`` (the service and everything it started), from /proc."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:
            pids.append(int(stat.parent.name))
    return pids


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    for pid in group_pids(pgid):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def wait_gone(base: str, pgid: int, timeout_s: float = 60) -> None:
    """Until nothing of the killed group runs and nothing answers on its port: a Ray process that outlived the kill
    kept the old app answering, and the restarted service's first listing came from it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        kill_group(pgid)
        try:
            requests.get(base + "/healthz", timeout=2)
        except requests.ConnectionError:
            if not group_pids(pgid):
                return
        except requests.Timeout:
            pass  # a listener without its app: Ray's proxy, until it sees its node gone
        time.sleep(0.5)
    raise AssertionError("the killed service's processes or port outlived it")


def start(config: Path, home: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TESSERA_API_KEYS")}
    env["TESSERA_HOME"] = str(home)
    env["TESSERA_ALLOW_HOSTS"] = "loopback"  # the slow step's server (the service allows public addresses only)
    log = open(home / f"serve-{time.time():.0f}.log", "wb")
    return subprocess.Popen([sys.executable, "-m", "flows", "serve", "--config", str(config), "--address", "local"],
                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def wait_ready(base: str, process: subprocess.Popen, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the service exited with {process.returncode}"
        try:
            if requests.get(base + "/tasks", timeout=5).headers.get("content-type", "").startswith("application/json"):
                return
        except requests.ConnectionError:
            pass
        time.sleep(1)
    raise AssertionError("the service did not answer in time")


@pytest.fixture
def service_config(tmp_path, sample_index, free_port_number) -> tuple[Path, str]:
    port = free_port_number
    config = {"proxy_location": "HeadOnly", "http_options": {"host": "127.0.0.1", "port": port},
              "applications": [{"name": "tessera", "route_prefix": "/", "import_path": "serve.app:build_app",
                                "args": {"models": [], "service": {"default_index": str(sample_index)}}}]}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path, f"http://127.0.0.1:{port}"


def test_tasks_survive_a_killed_service(service_config, tmp_path, slow_rerank):
    config, base = service_config
    first = start(config, tmp_path)
    try:
        wait_ready(base, first)
        done = requests.post(base + "/task/run", json={"flow": "bm25", "query": QUERY}, timeout=120).json()
        assert done["status"] == "finished", done
        # An upload whose ingestion has not finished when the service dies (sent first: the replica's own checks
        # take seconds, which the slow tasks must not spend running to their end).
        upload = requests.post(base + "/v1/indices/cut/documents", json={"documents": DOCUMENTS}, timeout=60).json()
        uploads = list((tmp_path / "uploads" / "cut").iterdir())
        assert len(uploads) == 1
        # 200 reranked rows of 0.25 s: 50 s a task, so that the first cannot finish while the second's worker starts
        # (with 40 rows, 10 s, one slow task was found finished after the restart once, on a heavily loaded machine)
        slow = [requests.post(base + "/task/enqueue", json={"flow": slow_rerank.slow_flow(200), "query": QUERY},
                              timeout=60).text for _ in range(2)]
        def states() -> set[tuple[str, str]]:
            """Each slow task's status and its first step's (a task is running a moment before its first step
            starts: killed then, it has no step done)."""
            bodies = [requests.get(f"{base}/task/progress/{t}", timeout=30).json() for t in slow]
            return {(b["status"], b["progress"]["step_progress"]["bm25"]["status"]) for b in bodies}

        deadline = time.monotonic() + 120  # both running (one's calls alone can reach 4 while the other is queued)
        while (len(slow_rerank.times) < 4 or states() != {("running", "done")}) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(slow_rerank.times) >= 4, "the slow tasks never started"
        assert states() == {("running", "done")}
        status = requests.get(f"{base}/task/progress/{upload['task_id']}", timeout=30).json()["status"]
        assert status in ("queued", "running")
    finally:
        first.send_signal(signal.SIGKILL)  # the service's own process, by its PID
        first.wait(30)
        wait_gone(base, first.pid)  # and whatever of its Ray outlived it, as a crashed machine would lose it
    killed = time.monotonic()
    second = start(config, tmp_path)
    try:
        wait_ready(base, second)
        listed = requests.get(base + "/tasks", timeout=30).json()
        assert sorted(t["id"] for t in listed["tasks"]) == sorted([done["task_id"], *slow, upload["task_id"]])
        assert listed["counts"] == {"finished": 1, "failed": 3}
        assert sum(listed["counts"].values()) == len(listed["tasks"])
        kept = requests.get(f"{base}/task/progress/{done['task_id']}", timeout=30).json()
        assert kept["result"] == done["result"] and kept["status"] == "finished"
        for task_id in slow:
            body = requests.get(f"{base}/task/progress/{task_id}", timeout=30).json()
            assert body["status"] == "failed" and body["has_finished"] and body["error"].startswith("interrupted")
            progress = body["progress"]
            done_steps, total = map(int, progress["pipeline_progress"].split("/"))
            states = [s["status"] for s in progress["step_progress"].values()]
            assert total == 2 and done_steps == states.count("done") == 1 and states.count("interrupted") == 1
            assert progress["pipeline_percentage"] == 50
        assert [t for t in slow_rerank.times if t > killed + 1] == []  # the step work died with the service
        cut = requests.get(f"{base}/task/progress/{upload['task_id']}", timeout=30).json()
        assert cut["status"] == "failed" and cut["error"].startswith("interrupted")
        assert not uploads[0].exists()  # the upload went with its task (a client sends it again)
        staging = tmp_path / "indices" / "cut" / "_ingest"
        assert not staging.exists() or list(staging.iterdir()) == []
    finally:
        second.send_signal(signal.SIGINT)  # `serve run` shuts Serve down on an interrupt
        try:
            second.wait(60)
        except subprocess.TimeoutExpired:
            second.kill()
        time.sleep(2)
        kill_group(second.pid)
