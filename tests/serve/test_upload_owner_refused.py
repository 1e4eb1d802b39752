"""An upload making a new index whose owner file the disk refuses (here a tmpfs with no inode left after the upload's
own file, so the owner file's folder cannot be made: ENOSPC). Before, the owner file was written after the ingestion
was queued: the client got a 507 saying "nothing of this request was stored" while its task was queued, the index
listed and the upload's file kept (the same upload again: a 409 naming that task). Now the owner file is written in
the transaction that queues the task, so the 507 is true: no task, no index, no file; the same upload succeeds once
the disk has room. The service's app in a child process in a mount namespace of its own (``unshare``), with a real
SQLite task store on the tmpfs; no Ray (nothing gets as far as running)."""

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
import json, os, shutil, sys
from pathlib import Path

root = Path(sys.argv[1])
home = root / "home"
os.environ["TESSERA_HOME"] = str(home)
from fastapi.testclient import TestClient

from serve.api import app
from serve.indices.documents import DocumentsRequest
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve

service = Service(resolve(ServiceArgs(default_index=None, task_store=f"sqlite:///{root / 'tasks.db'}"), environ={}),
                  [], "tessera")
client = TestClient(app, raise_server_exceptions=False)
docs = {"documents": [{"id": "bees", "title": "Bees", "text": "honey bees make honey from nectar"}]}
(home / "indices").mkdir(parents=True, exist_ok=True)
(home / "uploads").mkdir(parents=True, exist_ok=True)
filler = root / "filler"
filler.mkdir()
while os.statvfs(root).f_favail > 2:  # room for the upload's folder and file, not for the index's owner file
    (filler / str(len(os.listdir(filler)))).touch()
refused = client.post("/v1/indices/up/documents", json=docs)
shutil.rmtree(filler)
said = {"status": refused.status_code, "body": refused.json(), "tasks": client.get("/tasks").json()["tasks"],
        "row": service.store.index("up"), "files": sorted(str(p.relative_to(home)) for p in home.rglob("*"))}
try:
    again = service.indices.add("up", DocumentsRequest.model_validate(docs), "local")  # queued (launching needs Ray)
    owner = json.loads((home / "indices" / "up" / "owner.json").read_text())
    said["again"] = {"task": service.store.task(again["task_id"], None)["status"], "owner": owner["owner"]}
except Exception as err:  # the old code: a 409, the index busy with the task the 507 said was not stored
    said["again"] = str(err)
print(json.dumps(said))
service.close()
"""


def test_an_upload_whose_owner_file_the_disk_refuses_queues_nothing(tmp_path):
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"]).returncode != 0:
        pytest.skip("needs unshare -rm (a user and mount namespace) to mount a tmpfs")
    mount = tmp_path / "m"
    mount.mkdir()
    command = (f"mount -t tmpfs -o size=16m,nr_inodes=400 tmpfs {mount} && "
               f"exec {sys.executable} -c \"$SCRIPT\" {mount}")
    done = subprocess.run(["unshare", "-rm", "sh", "-c", command], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "SCRIPT": SCRIPT, "HF_HUB_OFFLINE": "1",
                                            "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == 507 and out["body"]["error"]["code"] == "insufficient_storage", out
    assert "nothing of this request was stored" in out["body"]["error"]["message"]
    # and nothing was: no task, no index, no upload file (before: the task queued, the index made, the file kept)
    assert out["tasks"] == [] and out["row"] is None, out
    assert out["files"] == ["indices", "uploads"], out["files"]
    assert out["again"] == {"task": "queued", "owner": "local"}, out["again"]
