"""Task results kept zlib-compressed (``tasks.result_z``) on real SQLite files and a real PostgreSQL server: they read
back equal, the stored bytes are zlib and smaller than the JSON, listings never load them, and a store an earlier
version made (results as JSON in ``tasks.result``) gets the column and reads its old results as they were."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
import sqlalchemy as sa

from serve.tasks.taskstore import TaskStore

SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "data" / "sample" / "corpus.jsonl"


def new_task(store: TaskStore, owner: str = "alice") -> str:
    return store.create_task(owner, "hybrid", {"steps": {}}, [{"qid": "1", "query": "q"}], ["a"], limit=5)


def a_result(texts: list[str]) -> dict:
    """A result shaped as ``serve.tasks.results.task_result`` makes it: rows with text, scores and ranks; roles; a
    summary."""
    rows = [{"qid": "1", "query": "what shapes résumé ✓ text?", "docno": f"d{i}", "title": f"Title {i}",
             "text": text, "score": 1.0 / (60 + i), "rank": i, "retriever": ["bm25", "dense"][i % 2]}
            for i, text in enumerate(texts)]
    return {"data": rows, "result_description": {"documents": len(rows), "rows": len(rows), "queries": 1,
                                                 "time": 0.123, "cache_hit_ratio": 0.0, "text": "hybrid"},
            "aggregated_data": {}, "metadata": {"text": "document_text", "score": "score"}}


@pytest.fixture(scope="module")
def result() -> dict:
    """A result over the sample corpus's first 60 documents (real text: the compression ratio is not a toy's)."""
    with open(SAMPLE_CORPUS, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line, _ in zip(f, range(60))]
    return a_result(texts)


def stored(store: TaskStore, task_id: str) -> tuple[bytes | None, object]:
    """The task's ``result_z`` bytes and ``result`` value as the database holds them (no type decoding)."""
    with store.engine.connect() as conn:
        row = conn.execute(sa.text("SELECT result_z, result FROM tasks WHERE id = :id"), {"id": task_id}).one()
    return (None if row.result_z is None else bytes(row.result_z)), row.result


def test_a_finished_tasks_result_reads_back_equal_and_listings_leave_it_out(store_url, result):
    store = TaskStore(store_url)
    task_id = new_task(store)
    assert store.task(task_id, "alice")["result"] is None and "result_z" not in store.task(task_id, "alice")
    assert store.finish(task_id, "finished", result=result)
    task = store.task(task_id, "alice")
    assert task["result"] == result and "result_z" not in task
    listed = store.list_tasks("alice")
    assert [t["id"] for t in listed] == [task_id] and not {"result", "result_z"} & set(listed[0])


def test_the_stored_result_is_zlib_and_smaller_than_its_json(store_url, result):
    store = TaskStore(store_url)
    task_id = new_task(store)
    store.finish(task_id, "finished", result=result)
    compressed, legacy = stored(store, task_id)
    as_json = json.dumps(result).encode("utf-8")
    assert legacy is None  # new rows write result_z only
    assert compressed[:1] == b"\x78" and json.loads(zlib.decompress(compressed)) == result
    assert len(compressed) < len(as_json) / 2


def test_a_task_without_a_result_stores_none(store_url):
    store = TaskStore(store_url)
    task_id = new_task(store)
    assert store.finish(task_id, "failed", error="boom")
    assert store.task(task_id, "alice")["result"] is None
    assert stored(store, task_id) == (None, None)


def old_tasks_table(metadata: sa.MetaData) -> sa.Table:
    """``tasks`` as versions before ``result_z`` declared it: the result as JSON."""
    return sa.Table(
        "tasks", metadata,
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("owner", sa.String(64), nullable=False, index=True),
        sa.Column("status", sa.String(16), nullable=False, index=True),
        sa.Column("flow", sa.String(200), nullable=False),
        sa.Column("spec", sa.JSON, nullable=False),
        sa.Column("queries", sa.JSON, nullable=False),
        sa.Column("steps", sa.JSON, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("updated", sa.Float, nullable=False),
        sa.Column("current_step", sa.String(200)),
        sa.Column("steps_done", sa.Integer, nullable=False, default=0),
        sa.Column("rows_done", sa.Integer, nullable=False, default=0),
        sa.Column("step_progress", sa.JSON, nullable=False),
        sa.Column("log", sa.JSON, nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("result", sa.JSON),
    )


def test_an_older_store_gets_result_z_and_reads_its_old_results_unchanged(store_url, result):
    old = sa.MetaData()
    table = old_tasks_table(old)
    engine = sa.create_engine(store_url)
    old.create_all(engine)
    with engine.begin() as conn:  # as the old TaskStore.finish left a finished task
        conn.execute(table.insert().values(
            id="old1", owner="alice", status="finished", flow="hybrid", spec={"steps": {}},
            queries=[{"qid": "1", "query": "q"}], steps=["a"], created=1.0, updated=2.0, current_step=None,
            steps_done=1, rows_done=60, step_progress={"a": {"status": "done"}}, log=["finished"], error=None,
            result=result))
    engine.dispose()

    store = TaskStore(store_url)
    assert "result_z" in {c["name"] for c in sa.inspect(store.engine).get_columns("tasks")}
    assert store.task("old1", "alice")["result"] == result
    assert stored(store, "old1")[0] is None  # read from ``result``, not rewritten

    new_id = new_task(store)
    smaller = {**result, "data": result["data"][:5]}
    assert store.finish(new_id, "finished", result=smaller)
    assert store.task(new_id, "alice")["result"] == smaller
    assert stored(store, new_id)[0] is not None
    assert {t["id"] for t in store.list_tasks("alice")} == {"old1", new_id}

    TaskStore(store_url)  # opening it again adds nothing twice
    assert store.task("old1", "alice")["result"] == result
