"""A task whose end the task store's disk refuses too (full, over quota, a file size limit: here ``RLIMIT_FSIZE`` 0,
which fails every write with EFBIG as a full disk fails it with ENOSPC). Before, it stayed ``running`` while the disk
stayed full and each poll was a 507; once space was freed, the next poll failed it as ``interrupted (... the service
was restarted or the worker died)``, which was not why. Now the failure is kept (Ray's key-value store, not the disk)
and answered, ``outcome_stored: false`` (``GET /tasks?status=failed`` lists it, ``?status=running`` not: they
filtered on the status stored), and stored with its own reason once the disk takes writes. The service's app
in a child process of its own (the limit is per process) with a local Ray and a real SQLite task store; the task runs
in that process (``run_to_end``, as a worker runs it), so the limit applies to its writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.process, pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, logging, os, resource, sys
from pathlib import Path

root = Path(sys.argv[1])
os.environ["TESSERA_HOME"] = str(root / "home")
import ray
from fastapi.testclient import TestClient

from serve.api import app
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from serve.tasks.taskrunner import run_to_end

ray.init(num_cpus=1, include_dashboard=False, logging_level=logging.WARNING)
args = ServiceArgs(default_index=None, task_store=f"sqlite:///{root / 'tasks.db'}", spare_task_workers=0)
service = Service(resolve(args, environ={}), [], "tessera")
client = TestClient(app, raise_server_exceptions=False)
spec = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"index": "nowhere", "k": 3}}}}
old = service.store.create_task("local", "mine", spec, [{"qid": "1", "query": "wax"}], ["bm25"])
service.store.finish(old, "failed", error="an earlier failure")  # stored: listed with the kept ones, in order
ran = service.store.create_task("local", "mine", spec, [{"qid": "1", "query": "honey"}], ["bm25"])
lost = service.store.create_task("local", "mine", spec, [{"qid": "1", "query": "bees"}], ["bm25"])
service.store.update(lost, status="running")  # its worker is gone (no worker was ever recorded for it)

def progress(task):
    answer = client.get(f"/task/progress/{task}")
    body = answer.json()
    return [answer.status_code, body.get("status"), body.get("error"), body.get("outcome_stored")]

resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # no file may take a byte more
ended = run_to_end(service.store, ran, 1000)  # its first write (running) and its failure are refused
full = {"ran": progress(ran), "lost": progress(lost), "listed": client.get("/tasks").json(), "ids": [old, ran, lost]}

def ids(status, **page):
    answer = client.get("/tasks", params={"status": status, **page}).json()
    return [[t["id"], t["status"]] for t in answer["tasks"]], answer["next"]

full["by_status"] = {status: ids(status) for status in ("queued", "running", "failed")}
first, after = ids("failed", limit=2)
full["failed_pages"] = [first, after and ids("failed", limit=2, before=after)[0]]
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
freed = {"ran": progress(ran), "lost": progress(lost), "listed": client.get("/tasks").json()}
rows = {name: service.store.task(task, None) for name, task in (("ran", ran), ("lost", lost))}
stored = {name: [row["status"], row["error"]] for name, row in rows.items()}
print(json.dumps({"ended": ended, "full": full, "freed": freed, "stored": stored}))
service.close()
ray.shutdown()
"""

REFUSED = ("the task stopped: the task store could not be written (the server's disk is full, or at a quota or file "
           "size limit); run the task again once the service's operator has freed space")
INTERRUPTED = "interrupted (the worker running the task stopped: the service was restarted or the worker died)"
NOT_STORED = (" (this outcome is not stored yet: the task store refused the write; it is stored once the task store "
              "takes writes again)")


def test_a_task_whose_failure_the_disk_refuses_ends_and_its_failure_is_stored_later(tmp_path):
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["ended"] is False
    # the disk full: each task is answered failed, its reason, marked not stored (was: running, then 507s)
    assert out["full"]["ran"] == [200, "failed", REFUSED + NOT_STORED, False], out["full"]
    assert out["full"]["lost"] == [200, "failed", INTERRUPTED + NOT_STORED, False], out["full"]
    listed = out["full"]["listed"]
    assert sorted((t["status"], t.get("outcome_stored")) for t in listed["tasks"] if t["error"] != "an earlier failure"
                  ) == [("failed", False)] * 2, listed
    assert listed["counts"] == {"failed": 3}, listed
    # each filter lists what the client is shown: the kept failures under failed (was: under queued and running)
    old, ran, lost = out["full"]["ids"]
    by_status = out["full"]["by_status"]
    assert by_status["queued"] == [[], None] and by_status["running"] == [[], None], by_status
    assert by_status["failed"] == [[[lost, "failed"], [ran, "failed"], [old, "failed"]], None], by_status
    assert out["full"]["failed_pages"] == [[[lost, "failed"], [ran, "failed"]], [[old, "failed"]]]
    # space freed: the next poll stores the failure kept, with the reason the worker gave (not "interrupted")
    assert out["freed"]["ran"] == [200, "failed", REFUSED, None], out["freed"]
    assert out["freed"]["lost"] == [200, "failed", INTERRUPTED, None], out["freed"]
    assert out["stored"] == {"ran": ["failed", REFUSED], "lost": ["failed", INTERRUPTED]}, out["stored"]
    assert all("outcome_stored" not in t for t in out["freed"]["listed"]["tasks"]), out["freed"]["listed"]
