"""``tessera serve`` drains on SIGTERM (what Kubernetes and systemd send) instead of dropping what is in flight: the
service started for real (its own Ray), slow searches running (a rerank step whose API answers after seconds),
SIGTERM to the command. Every search in flight ends with its 200, and a task it took (``/task/enqueue``) finishes; a
request that arrives meanwhile, ``/healthz`` included, is a 503 ``shutting_down`` with ``Retry-After``; the command
exits 0 once they are done, well within its grace period. A second SIGTERM ends the wait at once. Before, ``serve
run`` shut Serve down on the first signal and every search in flight got its connection closed ("Server
disconnected") within half a second."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
import yaml

from operators.testing import JsonHandler
from tests.flows.conftest import free_ports, wait_until_answering
from tests.serve.conftest import two_document_index

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
GRACE_S = 60


class SlowRerank:
    """``POST /rerank`` (Cohere's body) answered after ``seconds``; ``active`` counts the requests it is holding."""

    def __init__(self, seconds: float):
        self.seconds, self.active, self.lock = seconds, 0, threading.Lock()
        outer = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.read_json()
                with outer.lock:
                    outer.active += 1
                try:
                    time.sleep(outer.seconds)
                finally:
                    with outer.lock:
                        outer.active -= 1
                self.answer_json(200, {"results": [{"index": i, "relevance_score": 1.0 / (i + 1)}
                                                   for i in range(len(body["documents"]))]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/rerank"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def flow(self) -> dict:
        """bm25's two candidates, then two rerank calls of ``seconds`` each, one after the other."""
        return {"name": "slow", "steps": {
            "bm25": {"op": "retrieve.bm25", "params": {"k": 2}},
            "slow": {"op": "rerank.api", "params": {"url": self.url, "n": 2, "max_documents_per_request": 1,
                                                    "concurrent_requests": 1, "max_retries": 0}}}}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start(tmp_path: Path) -> tuple[subprocess.Popen, str, Path]:
    """``tessera serve`` on a free port with a two-document BM25 index as its default: the process, base URL and
    log path."""
    index = tmp_path / "home" / "indices" / "notes"
    two_document_index(index)
    port = free_ports(1)[0]
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "proxy_location": "HeadOnly", "http_options": {"host": "127.0.0.1", "port": port},
        "applications": [{"name": "tessera", "route_prefix": "/", "import_path": "serve.app:build_app",
                          "args": {"models": [], "llms": [],
                                   "service": {"default_index": str(index), "spare_task_workers": 0}}}]}))
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TESSERA_API_KEYS")}
    env["TESSERA_HOME"] = str(tmp_path / "home")
    env["TESSERA_ALLOW_HOSTS"] = "loopback"  # the slow rerank API (the service allows public addresses only)
    log_path = tmp_path / "serve.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([sys.executable, "-m", "flows", "serve", "--config", str(config), "--address",
                                    "local", "--grace-period", str(GRACE_S)], cwd=REPO, env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    return process, f"http://127.0.0.1:{port}", log_path


def end(process: subprocess.Popen) -> None:
    """Whatever of a ``tessera serve`` and its Ray is left."""
    if process.poll() is None:
        process.kill()
        process.wait(30)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture
def service(tmp_path):
    """A started service (``start``) once it answers; ends whatever of it is left after the test."""
    process, base, log_path = start(tmp_path)
    try:
        wait_until_answering(process, base + "/healthz", log_path)
        yield process, base, log_path
    finally:
        end(process)


def search(base: str, flow: dict) -> tuple[int, dict | str]:
    try:
        response = requests.post(base + "/v1/search", json={"flow": flow, "query": "honey bees and ants"},
                                 timeout=120)
    except requests.RequestException as err:
        return -1, f"{type(err).__name__}: {err}"
    return response.status_code, response.json()


def start_searches(base: str, slow: SlowRerank, count: int, waiting: int = 0) -> tuple[ThreadPoolExecutor, list]:
    """``count`` searches through the slow step, returned once every one is waiting on it (and the ``waiting``
    calls that already were)."""
    pool = ThreadPoolExecutor(count)
    futures = [pool.submit(search, base, slow.flow()) for _ in range(count)]
    deadline = time.monotonic() + 60
    while slow.active < count + waiting:
        done = [future.result() for future in futures if future.done()]
        assert time.monotonic() < deadline and not done, f"{slow.active} of {count} searches reached the slow step; " \
            f"ended: {done}"
        time.sleep(0.05)
    return pool, futures


def wait_draining(base: str) -> dict:
    """``/healthz``'s answer once it says the service is shutting down (the runner has told the replica)."""
    deadline = time.monotonic() + 15
    while True:
        response = requests.get(base + "/healthz", timeout=10)
        if response.status_code == 503 and response.json()["error"]["code"] == "shutting_down":
            return response.json()
        assert time.monotonic() < deadline, f"/healthz never said shutting_down: {response.text}"
        time.sleep(0.05)


def test_sigterm_lets_the_requests_in_flight_finish_and_refuses_new_ones(service):
    process, base, log_path = service
    slow = SlowRerank(seconds=2)
    try:  # a task the service took is waited for too: Serve's shutdown, and its Ray's, interrupted it
        longer = slow.flow()  # four times the searches' slow calls: it ends well after them and Serve's shutdown
        for step, after in (("again", "slow"), ("thrice", "again"), ("fourth", "thrice")):
            longer["steps"][step] = {**longer["steps"]["slow"], "inputs": [after]}
        enqueued = requests.post(base + "/task/enqueue", json={"flow": longer, "query": "honey bees"}, timeout=60)
        assert enqueued.status_code == 200, enqueued.text
        task_id, deadline = enqueued.text, time.monotonic() + 120
        while slow.active < 1:
            assert time.monotonic() < deadline, requests.get(f"{base}/task/progress/{task_id}", timeout=30).text
            time.sleep(0.05)
        pool, futures = start_searches(base, slow, 4, waiting=1)
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        health = wait_draining(base)
        assert health["error"]["type"] == "server_error" and health["error"]["param"] is None
        late = requests.post(base + "/v1/search", json={"flow": slow.flow(), "query": "ants"}, timeout=30)
        assert late.status_code == 503, late.text
        assert late.json()["error"]["code"] == "shutting_down"
        assert int(late.headers["Retry-After"]) > 0 and late.headers["Connection"] == "close"
        answers = [future.result(timeout=120) for future in futures]
        pool.shutdown()
        status = process.wait(GRACE_S + 60)
        took = time.monotonic() - signalled
    finally:
        slow.close()
    text = log_path.read_text()
    assert [code for code, _ in answers] == [200] * 4, (answers, text[-3000:])
    assert all(body["results"][0]["hits"] for _, body in answers), answers
    assert status == 0, text[-3000:]
    assert "drained" in text, text[-3000:]
    with sqlite3.connect(log_path.parent / "home" / "tasks.db") as db:
        [(ended, error)] = db.execute("SELECT status, error FROM tasks WHERE id = ?", (task_id,))
    assert (ended, error) == ("finished", None), text[-3000:]
    print(f"exited {took:.1f} s after SIGTERM;", *[line for line in text.splitlines() if "drained in" in line])
    # the searches' last seconds, then Serve's shutdown: not the grace period
    assert took < GRACE_S / 2, f"exited {took:.1f} s after SIGTERM: {text[-3000:]}"


def test_a_second_sigterm_stops_without_waiting_for_the_grace_period(service):
    process, base, log_path = service
    slow = SlowRerank(seconds=GRACE_S)  # longer than the grace period: only the second signal ends the wait
    try:
        pool, futures = start_searches(base, slow, 2)
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        wait_draining(base)
        process.send_signal(signal.SIGTERM)
        status = process.wait(GRACE_S + 60)
        took = time.monotonic() - signalled
        pool.shutdown(wait=False, cancel_futures=True)
    finally:
        slow.close()
    text = log_path.read_text()
    assert status == 0, text[-3000:]
    print(f"exited {took:.1f} s after the first SIGTERM")
    assert took < GRACE_S - 10, f"exited {took:.1f} s after the first SIGTERM: {text[-5000:]}"
    assert "second signal" in text, text[-3000:]


def test_a_sigterm_while_it_starts_stops_it_with_status_0(tmp_path):
    """A SIGTERM while `serve run` still deployed reached it outside its own handler: click's "Aborted!", and the
    interpreter's teardown crashed in Ray's (status 139; 1 where it did not). Sent once Ray has started."""
    process, _, log_path = start(tmp_path)
    try:
        deadline = time.monotonic() + 120
        while "Started a local Ray instance" not in log_path.read_text() and time.monotonic() < deadline:
            assert process.poll() is None, log_path.read_text()[-3000:]
            time.sleep(0.1)
        process.send_signal(signal.SIGTERM)
        status = process.wait(120)
    finally:
        end(process)
    assert status == 0, log_path.read_text()[-3000:]

