"""``tessera serve`` logs each HTTP request once where a user reads its logs: the command's own output (the terminal,
the journal) and Serve's log folder (``logs/serve/`` of the Ray session). Before, one request had three lines there:
Serve's proxy wrote its access line to ``proxy_<node>.log``, the ingress replica (``tessera_api``) wrote the same
request's to ``replica_tessera_api_*.log`` and to its stderr, which Ray forwards to the command's output (and keeps
in the worker's ``.err`` file). The packaged config turns the replica's access log off (Serve's ``LoggingConfig``
``enable_access_log``), so the proxy's line is the one. The real command, on the packaged config without its model
deployments (quick to start), Ray's session under a temporary ``RAY_TMPDIR`` of its own."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import requests
import yaml

from tests.flows.conftest import end_group, free_ports, wait_until_answering

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]


def packaged_config_without_models(path: Path) -> int:
    """``serve/config.yaml`` as it is but for a free port and no model or language-model deployment; the port."""
    config = yaml.safe_load((REPO / "serve" / "config.yaml").read_text())
    port = free_ports(1)[0]
    config["http_options"]["port"] = port
    (app,) = config["applications"]
    app["args"].update(models=[], llms=[])
    app["args"]["service"].update(default_index=None, spare_task_workers=0)
    path.write_text(yaml.safe_dump(config))
    return port


@pytest.fixture
def ray_tmp():
    """A short folder of its own for Ray's session (its socket paths must stay under 108 characters)."""
    folder = Path(tempfile.mkdtemp(prefix="tsr", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_one_request_is_logged_once_where_its_logs_are_read(tmp_path, ray_tmp):
    port = packaged_config_without_models(tmp_path / "config.yaml")
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "TESSERA_API_KEYS")}
    env.update(TESSERA_HOME=str(tmp_path / "home"), RAY_TMPDIR=str(ray_tmp))
    output = tmp_path / "serve.log"
    with open(output, "wb") as log:
        serving = subprocess.Popen([sys.executable, "-m", "flows", "serve", "--config", str(tmp_path / "config.yaml"),
                                    "--address", "local"], cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)  # its own group: the cleanup below ends all of it
        try:
            wait_until_answering(serving, f"http://127.0.0.1:{port}/healthz", output)
            answer = requests.get(f"http://127.0.0.1:{port}/flows/bm25", timeout=30)
            assert answer.status_code == 200, answer.text
            request_id = answer.headers["x-request-id"]
            time.sleep(5)  # Ray forwards a worker's stderr to the command within about a second
            serving.send_signal(signal.SIGTERM)
            assert serving.wait(120) == 0, output.read_text()[-3000:]
        finally:
            end_group(serving)  # and whatever of its Ray is left

    def lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if request_id in line and "GET /flows/" in line]

    (session,) = (ray_tmp / "ray").glob("session_2*")
    read = {"the command's output": lines(output.read_text(errors="replace"))}
    read.update({f"logs/serve/{file.name}": lines(file.read_text(errors="replace"))
                 for file in sorted((session / "logs" / "serve").glob("*.log"))})
    found = {where: found for where, found in read.items() if found}
    assert sum(map(len, found.values())) == 1, found
    ((where, (line,)),) = found.items()
    assert where.startswith("logs/serve/proxy_") and " 200 " in line and line.rstrip().endswith("ms"), line
    everywhere = [line for file in (session / "logs").rglob("*") if file.is_file()
                  for line in lines(file.read_text(errors="replace"))]
    assert everywhere == [line]  # nor in a worker's .err file of the session (what Ray forwards from)
