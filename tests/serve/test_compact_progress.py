"""An admin's compaction task writes its progress as it merges each shard (``serve.tasks.ingest_task.run_compact``), so
``/task/progress/{id}`` moves while it runs: its step's ``rows_out`` counts the live chunks merged, up to ``rows_in``
(the merged shards' chunks), where the finished task's own counts pick up. A real SQLite task store, the task's own
code, an index of the sample corpus with one shard per add and some documents deleted."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from operators.store import Index, IndexSettings
from serve.tasks import ingest_task, task_rows
from tests.serve.conftest import WatchedStore

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample" / "corpus.jsonl"
ADDS, PER_ADD = 4, 5


@pytest.fixture
def index(tmp_path):
    with open(SAMPLE, encoding="utf-8") as f:
        sample_docs = [json.loads(next(f)) for _ in range(ADDS * PER_ADD)]
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    for n in range(ADDS):
        docs = sample_docs[n * PER_ADD:(n + 1) * PER_ADD]
        ids = [d["_id"] for d in docs]
        index.add(pa.table({"docno": ids, "doc_id": ids, "title": [d["title"] for d in docs],
                            "text": [d["text"] for d in docs]}))
    index.delete(doc_ids=[sample_docs[1]["_id"], sample_docs[PER_ADD + 2]["_id"]])
    return index


def test_the_compaction_task_writes_the_chunks_merged_as_each_shard_is(index, tmp_path, monkeypatch):
    monkeypatch.setattr(task_rows, "PROGRESS_EVERY_S", 0.0)  # every shard's report, not one each half second
    store = WatchedStore(f"sqlite:///{tmp_path / 'tasks.db'}")
    job = {"index": "notes", "index_path": str(index.path), "owner": "alice"}
    task_id, why = store.create_compact_task("root", "notes", {"compact": job}, ingest_task.COMPACT_STEPS, limit=10)
    assert why == "ok"

    ingest_task.run_compact(store, task_id, job)

    task = store.task(task_id, None)
    assert task["status"] == "finished", task
    running = [a["step_output"] for a in store.answers if a["step_output"]["status"] == "running"]
    total = ADDS * PER_ADD
    # the task's start, then each shard's: live chunks merged so far, of the chunks the shards held
    assert [(a["rows_in"], a["rows_out"]) for a in running] == [(0, 0), (total, 4), (total, 8), (total, 13),
                                                                (total, 18)]
    assert task["step_progress"]["compact"]["rows_out"] == running[-1]["rows_out"] == len(Index.open(index.path))
    assert task["step_progress"]["compact"]["rows_in"] == total
    assert "merged 4 of 4 shards" in task["log"]


def test_the_writers_throttle_lets_one_write_per_interval_and_every_forced_one(monkeypatch):
    """``WriteThrottle``, which the three progress writers share: the first write, then none until
    ``PROGRESS_EVERY_S`` has passed, except those forced (a step's start or end, a log line)."""
    monkeypatch.setattr(task_rows, "PROGRESS_EVERY_S", 60.0)
    throttle = task_rows.WriteThrottle()
    assert throttle.due()
    assert not throttle.due()
    assert throttle.due(forced=True)
    assert not throttle.due()
    throttle.every_s = 0.0
    assert throttle.due()
