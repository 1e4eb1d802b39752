"""Requests that the server's disk refuses to store (here a file size limit, ``RLIMIT_FSIZE`` 0, which fails every
write with EFBIG as a full disk fails it with ENOSPC): a task enqueued, a chat started, a task deleted, a flow saved,
documents uploaded. Each is a 507 ``insufficient_storage`` naming what could not be written, not a 500
``internal_error``; the upload's file is removed and no index is made; the task stored before stays readable, and the
service answers as before once the disk takes writes again. The service's app (``serve.api.app``) in a child process
of its own (the limit is per process), with a real SQLite task store; no Ray (nothing gets as far as running)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.text_checks import TRACEBACK

pytestmark = [pytest.mark.process, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample" / "corpus.jsonl"


def run_script(script: str, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    """Run ``script`` in a Python child of its own (its file size limit is its own), offline; the child and what its
    last line printed (JSON)."""
    done = subprocess.run([sys.executable, "-c", script, *args], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    return done, json.loads(done.stdout.strip().splitlines()[-1])

#: The start of each script: a home with an (empty) index ``news``, named before Tessera is imported.
HOME = """
import json, os, resource, sys
from pathlib import Path

root = Path(sys.argv[1])
home = root / "home"
(home / "indices" / "news").mkdir(parents=True)
(home / "indices" / "news" / "manifest.json").write_text("{}")
os.environ["TESSERA_HOME"] = str(home)
"""

SCRIPT = HOME + """
from fastapi.testclient import TestClient

from serve.api import app
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve

args = ServiceArgs(default_index=str(home / "indices" / "news"), task_store=f"sqlite:///{root / 'tasks.db'}")
service = Service(resolve(args, environ={}), [], "tessera")
service.warming.join(timeout=120)
task = service.store.create_task("local", "bm25", {"steps": {}}, [{"qid": "1", "query": "honey"}], ["bm25"])
rows = [{"qid": "1", "docno": "bees#0", "title": "Bees", "text": "Honey bees.", "score": 1.0, "rank": 1}]
service.store.finish(task, "finished", result={"data": rows, "result_description": {}, "aggregated_data": {},
                                               "metadata": {}})
client = TestClient(app, raise_server_exceptions=False)
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # no file may take a byte more
answers = {
    "enqueue": client.post("/task/enqueue", json={"flow": "bm25", "queries": ["honey"]}),
    "chat": client.get("/task/chat/new", params={"task_id": task, "model": "local"}),
    "delete": client.delete(f"/task/{task}"),
    "flow": client.put("/flows/mine", json={"steps": {"bm25": {"op": "retrieve.bm25"}}}),
    "upload": client.post("/v1/indices/up/documents", json={"documents": [{"id": "a", "text": "hello " * 2000}]}),
}
said = {name: {"status": r.status_code, "body": r.json()} for name, r in answers.items()}
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
after = client.get(f"/task/progress/{task}").json()
saved = client.put("/flows/mine", json={"steps": {"bm25": {"op": "retrieve.bm25"}}}).status_code
print(json.dumps({"said": said, "after": after, "saved": saved, "task": task}))
service.close()
"""


def test_writes_the_disk_refuses_are_507s_and_lose_nothing(tmp_path):
    done, out = run_script(SCRIPT, str(tmp_path))
    for name, answer in out["said"].items():
        error = answer["body"]["error"]
        assert (answer["status"], error["code"], error["type"]) == (507, "insufficient_storage", "server_error"), \
            (name, answer)
        assert "could not be written (the server's disk is full, or at a quota or file size limit)" \
            in error["message"], error
        assert "nothing of this request was stored" in error["message"] and str(tmp_path) not in error["message"]
    assert "the task store could not be written" in out["said"]["enqueue"]["body"]["error"]["message"]
    assert "a file of the service could not be written" in out["said"]["upload"]["body"]["error"]["message"]
    assert TRACEBACK not in done.stdout
    assert out["after"]["status"] == "finished" and out["after"]["result"]["data"][0]["docno"] == "bees#0"
    assert out["saved"] == 201  # the disk takes writes again: the same request succeeds
    home = tmp_path / "home"
    assert not list((home / "uploads").rglob("*.jsonl")) and not (home / "indices" / "up").exists()


#: The start of the task scripts: the sample indexed for BM25, a task store and a task of ``K`` hits a query for the
#: queries ``WORDS``, and the store's largest file's size then (``grown``).
TASK = """
import json, os, resource, signal, sys
from pathlib import Path

root, corpus = Path(sys.argv[1]), sys.argv[2]
os.environ["TESSERA_HOME"] = str(root / "home")
from flows.api import ingest
from serve.tasks.taskrunner import run_to_end
from serve.tasks.taskstore import TaskStore

index = str(root / "idx")
ingest(corpus, index, settings={"dense": False}, executor="local", progress=False)
store = TaskStore(f"sqlite:///{root / 'tasks.db'}")
spec = {"steps": {"bm25": {"op": "retrieve.bm25", "params": {"index": index, "k": K}}}}
task = store.create_task("local", "mine", spec, [{"qid": str(i), "query": w} for i, w in enumerate(WORDS)], ["bm25"])
grown = max(os.path.getsize(p) for p in root.glob("tasks.db*"))
"""

RESULT_SCRIPT = """
K = 1000
WORDS = ["history", "music", "war", "science", "art", "city", "river", "people", "world", "king", "water", "language"]
""" + TASK + """
# room for the task's progress and its failure (a few pages each), not for a result of thousands of passages
resource.setrlimit(resource.RLIMIT_FSIZE, (grown + 64 * 1024, resource.RLIM_INFINITY))
ended = run_to_end(store, task, 100000)
row = store.task(task, None)
print(json.dumps({"ended": ended, "status": row["status"], "error": row["error"], "log": row["log"][-1]}))
"""


def test_a_result_the_disk_refuses_fails_its_task_saying_so(tmp_path):
    """A task whose result the task store's disk will not take fails with one line saying so (its worker goes on to
    the next task); before, its error was SQLAlchemy's ``OperationalError: (sqlite3.OperationalError) database or disk
    is full (Background on this error at: https://sqlalche.me/e/...)``, or ``disk I/O error``."""
    _, out = run_script(RESULT_SCRIPT, str(tmp_path), str(SAMPLE))
    said = ("the result could not be stored: the task store could not be written (the server's disk is full, or at a "
            "quota or file size limit); run the task again once the service's operator has freed space")
    assert out == {"ended": True, "status": "failed", "error": said, "log": f"failed: {said}"}, out


PROGRESS_SCRIPT = """
K, WORDS = 3, ["music"]
""" + TASK + """
refused = []

def space_freed(*_):  # the disk refused a write (SIGXFSZ), then its operator freed space: later writes succeed
    refused.append(True)
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

signal.signal(signal.SIGXFSZ, space_freed)
# room for the write that marks the task running (two WAL frames of 4 KiB), not for its first progress write
resource.setrlimit(resource.RLIMIT_FSIZE, (grown + 10000, resource.RLIM_INFINITY))
ended = run_to_end(store, task, 100000)
row = store.task(task, None)
print(json.dumps({"refused": refused == [True], "status": row["status"], "error": row["error"],
                  "log": row["log"][1:]}))
"""


def test_a_progress_write_the_disk_refuses_fails_its_task_saying_so(tmp_path):
    """A task whose progress the task store's disk refused mid-run failed with SQLAlchemy's text, ``OperationalError:
    (sqlite3.OperationalError) disk I/O error [SQL: UPDATE tasks SET ...] [parameters: ...] (Background on this
    error at: ...)``; now with one line saying the disk refused. The disk takes writes again (the refusal's
    SIGXFSZ lifts the file size limit), so the failure itself is stored."""
    _, out = run_script(PROGRESS_SCRIPT, str(tmp_path), str(SAMPLE))
    said = ("the task stopped: the task store could not be written (the server's disk is full, or at a quota or file "
            "size limit); run the task again once the service's operator has freed space")
    assert out == {"refused": True, "status": "failed", "error": said, "log": ["running on Ray", f"failed: {said}"]}, \
        out


CHAT_SCRIPT = HOME + """
from fastapi.testclient import TestClient

from operators.llm.testing import KEY_ENV, FaultServer
from serve.api import app
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import finished_search

with FaultServer(reply="Honey bees make it [1].") as server:
    os.environ["TESSERA_MODELS"] = str(server.models_file(root / "models.yaml"))
    os.environ[KEY_ENV] = "sk-fault-test"
    args = ServiceArgs(default_index=str(home / "indices" / "news"), task_store=f"sqlite:///{root / 'tasks.db'}")
    service = Service(resolve(args, environ={}), [], "tessera")
    service.warming.join(timeout=120)
    client = TestClient(app, raise_server_exceptions=False)
    task = finished_search(service)
    chat = client.get("/task/chat/new", params={"task_id": task, "model": "fault-ok"}).text
    asked = client.get(f"/task/chat/{chat}", params={"message": "Which insects make honey?"})  # litellm's imports
    assert asked.status_code == 200, asked.text
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # no file may take a byte more
    streamed = client.get(f"/task/chat/{chat}", params={"message": "And wasps?", "stream": True})
    plain = client.get(f"/task/chat/{chat}", params={"message": "And ants?"})
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    kept = client.get(f"/task/{task}/chats").json()
    print(json.dumps({"streamed": [streamed.status_code, streamed.text], "plain": [plain.status_code, plain.json()],
                      "kept": kept}))
    service.close()
"""


def test_a_chat_turn_the_disk_refuses_ends_a_streamed_answer_with_a_507_event(tmp_path):
    """The model answered, and the turn could not be kept: a streamed answer ends with the 507 as its last event
    (before, the stream was cut without one: the escaped OperationalError closed the connection mid-answer), an
    answer asked without ``stream`` is the 507; the chat keeps its earlier turn only."""
    _, out = run_script(CHAT_SCRIPT, str(tmp_path))
    status, text = out["streamed"]
    events = [line.removeprefix("data: ") for line in text.splitlines() if line.startswith("data: ")]
    assert status == 200 and events, text  # the headers went before the answer was written
    last = json.loads(events[-1])
    assert last["error"]["code"] == "insufficient_storage", text
    assert "the task store could not be written" in last["error"]["message"]
    assert out["plain"][0] == 507 and out["plain"][1]["error"]["code"] == "insufficient_storage", out["plain"]
    (chat,) = out["kept"]["chats"]
    assert [m["content"] for m in chat["messages"] if m["role"] == "user"] == ["Which insects make honey?"], chat


REVOKE_SCRIPT = """
import json, os, resource, sys
from pathlib import Path

root = Path(sys.argv[1])
os.environ["TESSERA_HOME"] = str(root / "home")
from fastapi.testclient import TestClient

from operators.api_keys import key_hash
from serve.security import auth
from serve.api import app
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve

ALICE, OPS = "alice-key-0123456789", "ops-key-0123456789"
config = resolve(ServiceArgs(default_index=None, task_store=f"sqlite:///{root / 'tasks.db'}", spare_task_workers=0,
                             api_keys=[{"id": "alice", "sha256": key_hash(ALICE)},
                                       {"id": "ops", "sha256": key_hash(OPS), "admin": True}]), environ={})
service = Service(config, [], "tessera")
service.revocations.ttl = 0.0  # every request reads the revocations: what the store holds, now
auth.configure(config["keys"], None, None)
client = TestClient(app, raise_server_exceptions=False)
as_ops, as_alice = ({"Authorization": f"Bearer {key}"} for key in (OPS, ALICE))
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # no file may take a byte more
refused = client.post("/v1/admin/keys/alice/revoke", headers=as_ops)
alice_meanwhile = client.get("/tasks", headers=as_alice).status_code
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
done = client.post("/v1/admin/keys/alice/revoke", headers=as_ops).status_code
alice_after = client.get("/tasks", headers=as_alice).status_code
print(json.dumps({"refused": [refused.status_code, refused.json()], "alice_meanwhile": alice_meanwhile,
                  "done": done, "alice_after": alice_after}))
service.close()
"""


def test_a_key_revocation_the_disk_refuses_is_a_507_and_the_key_stays_as_it_was(tmp_path):
    """An admin's ``POST /v1/admin/keys/{id}/revoke`` on a full disk: a 507 saying the task store could not be
    written (it was a 500), the key still let in, as the store says; once the disk takes writes, the same request
    revokes it."""
    _, out = run_script(REVOKE_SCRIPT, str(tmp_path))
    status, body = out["refused"]
    assert (status, body["error"]["code"]) == (507, "insufficient_storage"), body
    assert body["error"]["message"].startswith("POST /v1/admin/keys/alice/revoke: the task store could not be written")
    assert (out["alice_meanwhile"], out["done"], out["alice_after"]) == (200, 200, 401), out


DELETE_SCRIPT = """
import json, os, resource, sys
from pathlib import Path

root = Path(sys.argv[1])
os.environ["TESSERA_HOME"] = str(root / "home")
from fastapi.testclient import TestClient

from serve.api import app
from serve.indices.documents import DocumentsRequest
from serve.tasks.ingest_task import run_ingest
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve

args = ServiceArgs(default_index=None, task_store=f"sqlite:///{root / 'tasks.db'}", spare_task_workers=0)
service = Service(resolve(args, environ={}), [], "tessera")
queued = service.indices.add("notes", DocumentsRequest.model_validate(
    {"documents": [{"id": "bees", "text": "honey bees make honey"}]}), "local")
run_ingest(service.store, queued["task_id"], service.store.task(queued["task_id"], None)["spec"]["ingest"])
client = TestClient(app, raise_server_exceptions=False)
indices = root / "home" / "indices"
resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY))  # no file may take a byte more
refused = client.delete("/v1/indices/notes")
folders = sorted(p.name for p in indices.iterdir())
documents = client.get("/v1/indices/notes/documents").json()
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
deleted = client.delete("/v1/indices/notes").status_code
print(json.dumps({"refused": [refused.status_code, refused.json()], "folders": folders, "documents": documents,
                  "deleted": deleted, "left": sorted(p.name for p in indices.iterdir())}))
service.close()
"""


@pytest.mark.integration  # MiniLM embeds the upload in the child process
def test_an_index_delete_the_disk_refuses_leaves_the_index_whole(tmp_path):
    """``DELETE /v1/indices/{name}`` on a full disk moved the index's folder aside, then could not delete its record:
    the 507 said nothing changed, yet the index listed no document (its folder hidden as ``.deleted-notes-*``), and
    the folder stayed on the full disk for good, also after the delete that succeeded later. Now the folder is put
    back: the index reads as before, and the later delete removes it."""
    _, out = run_script(DELETE_SCRIPT, str(tmp_path))
    assert out["refused"][0] == 507 and out["refused"][1]["error"]["code"] == "insufficient_storage", out["refused"]
    assert out["folders"] == ["notes"], out["folders"]
    assert [d["id"] for d in out["documents"]["documents"]] == ["bees"], out["documents"]
    assert (out["deleted"], out["left"]) == (200, []), out
