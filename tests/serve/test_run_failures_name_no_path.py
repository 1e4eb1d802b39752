"""Over HTTP, a failure while a flow runs reaches the client without the server's paths: a task's ``error``, its log
and the task list, a query's ``degraded`` reason in a task's result, a search and a chat's answer (plain and as
server-sent events). Before, they quoted the model folder under ``$TESSERA_HOME`` (a ColBERT checkpoint whose
config.json is damaged), the .gguf that llama.cpp could not load, the index's folder with a damaged shard. The
server's log keeps each message as it was. Real HTTP on 127.0.0.1 (the service's FastAPI app under uvicorn), a real
SQLite task store, tasks on real Ray actors."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.serve.conftest import two_document_index

pytestmark = [pytest.mark.ray, pytest.mark.slow]

BM25 = {"op": "retrieve.bm25", "params": {"k": 5}}
#: A flow that answers with the language model whose .gguf llama.cpp cannot load (``broken``, the home's alias).
ANSWER = {"steps": {"bm25": BM25, "context": {"op": "generate.context"},
                    "answer": {"op": "generate.answer", "params": {"model": "broken", "max_tokens": 4}}}}


@pytest.fixture
def served(ray_session, upload_service, monkeypatch):
    """The API over a service whose home holds the index ``news``, ``damaged`` (a shard's file overwritten), the
    ColBERT model ``broken-colbert`` (its config.json cut short) and the alias ``broken`` of a .gguf that is no
    model: the base URL and the home."""
    from operators.models.colbert import new_colbert
    from tests.serve.conftest import api_on_localhost

    home = Path(os.environ["TESSERA_HOME"])
    for name in ("news", "damaged"):
        two_document_index(upload_service.indices.folder / name)
    shard, = (upload_service.indices.folder / "damaged" / "shards").iterdir()
    (shard / "bm25_tf.npz").write_bytes(b"not numpy")
    colbert = new_colbert("minilm").save(home / "models" / "broken-colbert")
    (Path(colbert) / "config.json").write_text("{")
    (home / "llm").mkdir()
    (home / "llm" / "bad.gguf").write_bytes(b"GGUF" + bytes(64))
    monkeypatch.delenv("TESSERA_MODELS", raising=False)
    (home / "models.yaml").write_text(f"broken: tessera/{home / 'llm' / 'bad.gguf'}\n")
    with api_on_localhost() as url:
        yield url, home


def server_paths(home: Path) -> list[str]:
    """What no answer may hold: the home (and the test's folder above it), the virtualenv, the working directory and
    the user's home."""
    return [str(home), str(home.parent), sys.prefix, os.getcwd(), os.path.expanduser("~")]


def assert_no_path(home: Path, text: str) -> None:
    leaked = [path for path in server_paths(home) if path in text]
    assert not leaked, (leaked, text)


def run(base: str, body: dict) -> dict:
    answer = httpx.post(f"{base}/task/run", json=body, timeout=300)
    assert answer.status_code == 200, answer.text
    return answer.json()


def worker_log_says(*words: str) -> bool:
    """Whether a Ray worker's log (where a task's worker writes the server's log) has a line with all ``words``."""
    import ray

    logs = Path(ray._private.worker._global_node.get_logs_dir_path())
    return any(all(word in line for word in words) for path in logs.glob("worker-*.err")
               for line in path.read_text(errors="replace").splitlines())


def test_a_failed_task_names_no_server_path_which_the_server_log_keeps(served):
    base, home = served
    cases = [({"bm25": BM25, "cb": {"op": "rerank.colbert", "params": {"model": "broken-colbert"}}}, "news",
              "config file at 'config.json' is not a valid JSON file", str(home / "models" / "broken-colbert")),
             ({"bm25": BM25}, "damaged", "index damaged has 1 damaged shard(s)", str(home / "indices" / "damaged"))]
    for steps, index, says, path in cases:
        task = run(base, {"flow": {"steps": steps}, "query": "honey bees", "index": index})
        assert task["status"] == "failed" and says in task["error"], task
        assert_no_path(home, json.dumps(task))
        read = httpx.get(f"{base}/task/progress/{task['task_id']}", timeout=60)
        assert read.json()["error"] == task["error"] and f"failed: {task['error']}" in read.json()["progress"]["log"]
        assert_no_path(home, read.text)
        deadline = time.monotonic() + 30  # the worker's stderr reaches its log file a moment later
        while not worker_log_says(f"task {task['task_id']} failed", path):
            assert time.monotonic() < deadline, f"the worker's log has no line with {path}"
            time.sleep(0.2)
    listed = httpx.get(f"{base}/tasks", timeout=60)
    assert [t["status"] for t in listed.json()["tasks"]] == ["failed", "failed"]
    assert_no_path(home, listed.text)


def test_a_degraded_answer_names_no_server_path_in_a_task_a_search_or_a_chat(served, caplog):
    base, home = served
    caplog.set_level(logging.WARNING)
    task = run(base, {"flow": ANSWER, "query": "honey bees", "index": "news"})
    assert task["status"] == "finished", task
    reason = task["result"]["aggregated_data"][task["result"]["data"][0]["qid"]]["degraded"]["reason"]
    assert "Failed to load model from file: bad.gguf" in reason, reason
    assert_no_path(home, json.dumps(task))

    search = httpx.post(f"{base}/v1/search", json={"flow": ANSWER, "query": "honey bees", "index": "news"},
                        timeout=300)
    assert search.status_code == 200 and "bad.gguf" in search.text, search.text
    assert_no_path(home, search.text)
    # the server's log (here, this process's: the search ran in it) keeps the reason with the file's path
    assert any(str(home / "llm" / "bad.gguf") in record.getMessage() for record in caplog.records)

    found = run(base, {"flow": {"steps": {"bm25": BM25}}, "query": "honey bees", "index": "news"})
    chat = httpx.get(f"{base}/task/chat/new", params={"task_id": found["task_id"], "model": "broken"}, timeout=60)
    assert chat.status_code == 200, chat.text
    asked = {"message": "what do bees make?"}
    reply = httpx.get(f"{base}/task/chat/{chat.text}", params=asked, timeout=300)
    assert reply.status_code == 200 and "bad.gguf" in reply.text, reply.text
    streamed = httpx.get(f"{base}/task/chat/{chat.text}", params={**asked, "stream": "true"}, timeout=300)
    assert streamed.status_code == 200 and "bad.gguf" in streamed.text, streamed.text
    for text in (reply.text, streamed.text):
        assert_no_path(home, text)
