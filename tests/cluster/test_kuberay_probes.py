"""The workers' readiness probe of cluster/kuberay/rayservice.yaml, run as the kubelet runs it (``bash -c`` with the
image's GNU wget) against real HTTP servers on localhost that stand in for the node's raylet agent, its Serve proxy
and Tessera's ``/healthz``: it passes only when all three answer, fails on the 503s the service gives (``/healthz``
while a model loads or ``tessera serve`` drains, ``/-/healthz`` while Ray drains the node), and ends within its own
``timeoutSeconds`` when ``/healthz`` accepts the connection and never answers (a replica stuck on a busy event loop).
"""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

from operators.testing import JsonHandler, local_http_server
from tests.cluster.test_kuberay import cluster_spec, manifest

pytestmark = [pytest.mark.slow,  # the hung case waits out the probe's own 4 s timeout
              pytest.mark.skipif(shutil.which("wget") is None, reason="the probe runs wget (in Ray's images)")]


def readiness_probe(group: str) -> dict:
    spec = cluster_spec(manifest("rayservice.yaml"))
    (worker,) = next(g for g in spec["workerGroupSpecs"] if g["groupName"] == group)["template"]["spec"]["containers"]
    return worker["readinessProbe"]


def stand_in(healthz: str, proxy: str = "ok"):
    """One server for the three endpoints the probe asks (on the agent's and the proxy's ports alike)."""

    class Handler(JsonHandler):
        def do_GET(self) -> None:  # noqa: N802
            if self.path == "/api/local_raylet_healthz":
                self.text(200, "success")
            elif self.path == "/-/healthz":  # Serve's proxy: DRAINING_MESSAGE while its node drains
                if proxy == "ok":
                    self.text(200, "success")
                else:
                    self.text(503, "This node is being drained.")
            elif self.path == "/healthz" and healthz == "hang":
                time.sleep(60)
            elif self.path == "/healthz":
                code = {"ok": 200, "shutting_down": 503}[healthz]
                self.answer_json(code, {"status": "ok"} if code == 200 else {"error": {"code": healthz}})
            else:
                self.answer_json(404, {})

        def text(self, code: int, body: str) -> None:
            data = body.encode()
            self.send_response(code)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return local_http_server(Handler)


@pytest.mark.parametrize("healthz, proxy, ready", [
    ("ok", "ok", True),
    ("shutting_down", "ok", False),
    ("ok", "draining", False),
    ("hang", "ok", False),
])
@pytest.mark.parametrize("group", ["cpu", "gpu"])
def test_the_readiness_probe_passes_only_when_every_check_answers_in_time(group, healthz, proxy, ready):
    probe = readiness_probe(group)
    with stand_in(healthz, proxy) as url:
        port = url.rstrip("/").rsplit(":", 1)[1]
        command = [word.replace("localhost:52365", f"localhost:{port}").replace("localhost:8000", f"localhost:{port}")
                   for word in probe["exec"]["command"]]
        started = time.monotonic()
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=probe["timeoutSeconds"] + 30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the probe was still running {probe['timeoutSeconds'] + 30} s later")
        took = time.monotonic() - started
    assert (done.returncode == 0) is ready, (done.returncode, done.stdout, done.stderr)
    # The kubelet gives up after timeoutSeconds: the command must end by then on its own (wget retries 20 times).
    assert took <= probe["timeoutSeconds"], f"{took:.1f} s for a probe with timeoutSeconds {probe['timeoutSeconds']}"
