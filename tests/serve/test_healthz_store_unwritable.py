"""``/healthz`` on a task store that cannot be written: its disk full (a tmpfs filled up, in a mount namespace of its
own) or the service at a file size limit (``RLIMIT_FSIZE`` 0, which fails every write with EFBIG). Before, its check
was a ``SELECT 1``, which reads nothing from the file: ``/healthz`` said ``task_store: ok`` while every enqueue was a
507. Now a 503 naming ``task_store`` and why, and 200 again once the store can grow. The ingress's handler over a real
``Service`` with a real SQLite store, in a child process (the limit and the mount are per process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.process, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import asyncio, json, os, resource, subprocess, sys
from pathlib import Path
from types import SimpleNamespace

root, how = Path(sys.argv[1]), sys.argv[2]
os.environ["TESSERA_HOME"] = str(root / "home")
from serve.api import ModelAPI
from serve.http.errors import ApiError
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve

args = ServiceArgs(default_index=None, task_store=f"sqlite:///{root / 'tasks.db'}", spare_task_workers=0)
service = Service(resolve(args, environ={}), [], "tessera")

async def no_models():
    return []

def healthz():
    replica = SimpleNamespace(cards=[], service=service, _live_cards=no_models)
    try:
        return [200, asyncio.run(ModelAPI.func_or_class.healthz(replica))["task_store"]]
    except ApiError as err:
        return [err.status, err.param, err.message]

said = {"room": healthz()}
if how == "full":
    disk = os.statvfs(root)
    with open(root / "filler", "wb") as filler:  # another program fills the disk
        filler.write(bytes(disk.f_bavail * disk.f_frsize))
else:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))
said["refused"] = healthz()
try:
    service.store.create_task("local", "mine", {}, [], [])
    said["write"] = "stored"
except Exception as err:
    said["write"] = type(err).__name__
if how == "full":
    (root / "filler").unlink()
else:
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
said["freed"] = healthz()
print(json.dumps(said))
service.close()
"""


def run(command: list[str], **env: str) -> dict:
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, **env, "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_healthz_says_the_task_store_cannot_grow_at_a_file_size_limit(tmp_path):
    out = run([sys.executable, "-c", SCRIPT, str(tmp_path), "limit"])
    assert out["room"] == [200, "ok"] and out["write"] == "OperationalError", out
    assert out["refused"][:2] == [503, "task_store"], out  # before: [200, "ok"]
    message = out["refused"][2]
    assert message.startswith("not ready: task_store: sqlite:///tasks.db cannot be written: the service's file size "
                              "limit (ulimit -f: 0 KiB) leaves it no room to grow"), message
    assert str(tmp_path) not in message
    assert out["freed"] == [200, "ok"], out


def test_healthz_says_the_task_store_disk_is_full(tmp_path):
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"]).returncode != 0:
        pytest.skip("needs unshare -rm (a user and mount namespace) to mount a small tmpfs")
    mount = tmp_path / "m"
    mount.mkdir()
    command = f"mount -t tmpfs -o size=4m tmpfs {mount} && exec {sys.executable} -c \"$SCRIPT\" {mount} full"
    out = run(["unshare", "-rm", "sh", "-c", command], SCRIPT=SCRIPT)
    assert out["room"] == [200, "ok"] and out["write"] == "OperationalError", out
    assert out["refused"][:2] == [503, "task_store"], out  # before: [200, "ok"]
    message = out["refused"][2]
    assert message.startswith("not ready: task_store: sqlite:///tasks.db cannot be written: its disk is full "
                              "(0 KiB free"), message
    assert out["freed"] == [200, "ok"], out
