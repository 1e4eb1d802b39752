"""A home copied elsewhere (``cp -a``, a backup restored) with an upload that a kill cut short: the service started on
the copy cleans up the copy's leftovers (the uploaded file, the staging, the first upload's empty index), and touches
nothing of the old home. A task records its upload's paths whole, and the clean-up used them as they were: it removed
the old home's index folder and uploaded file (a live service's upload there lost its file mid-read) and left the
copy's behind, its index listed with a staging no run would finish. Real folders, a real SQLite task store copied
with its home, the clean-up a replica runs at its start (``interrupted``) and after a cancel (``discard_leftovers``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from serve.tasks.taskstore import TaskStore


def interrupted_upload(home: Path) -> str:
    """The home a service left when it was killed during a first upload into index ``news``: its empty index (the
    manifest ``Index.create`` wrote), the run's staging, the uploaded file and the task, unfinished, in the store."""
    from operators.store import Index

    index = home / "indices" / "news"
    Index.create(index)
    staging = index / "_ingest" / "abc123"
    staging.mkdir(parents=True)
    (staging / "abc123-00000.parquet").write_bytes(b"staged")
    upload = home / "uploads" / "news" / "u1.jsonl"
    upload.parent.mkdir(parents=True)
    upload.write_text('{"_id": "a", "text": "honey bees"}\n')
    job = {"ingest": {"index": "news", "index_path": str(index), "source": str(upload), "staging": str(staging)},
           "documents": 1}
    task_id, why = TaskStore(f"sqlite:///{home / 'tasks.db'}").create_ingest_task(
        "alice", "news", "ingest", job, ["staging", "ingest"], limit=5)
    assert why == "ok"
    return task_id


def files_of(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if "tasks.db" not in p.name)


@pytest.mark.parametrize("how", ["interrupted", "cancelled"])
def test_a_copied_home_cleans_up_its_own_upload_and_leaves_the_old_home_alone(tmp_path, monkeypatch, how):
    from serve.tasks.taskrunner import INTERRUPTED, discard_leftovers, interrupted

    old, new = tmp_path / "old-home", tmp_path / "moved" / "home"
    task_id = interrupted_upload(old)
    shutil.copytree(old, new, symlinks=True)
    before = files_of(old)
    monkeypatch.setenv("TESSERA_HOME", str(new))  # the service on the copy (a replica sets it to its home)
    store = TaskStore(f"sqlite:///{new / 'tasks.db'}")
    if how == "interrupted":  # the replica's start: the task's worker is gone
        assert interrupted(store, task_id, INTERRUPTED)
    else:  # cancelled, its worker gone since
        assert store.finish(task_id, "cancelled")
        discard_leftovers(store.task(task_id, None), store, wait_s=0.0)
    assert files_of(old) == before  # the old home as it was: its index, staging and upload
    assert not (new / "uploads" / "news" / "u1.jsonl").exists()
    assert not (new / "indices" / "news").exists()  # the first upload's empty index, its staging with it
    assert not [p for p in (new / "indices").iterdir()]  # nor moved aside and left
    assert store.index("news") is None  # its record went too: the name is free again
    task = store.task(task_id, None)
    assert task["status"] == ("failed" if how == "interrupted" else "cancelled")
    if how == "interrupted":
        assert "the index it was making is gone" in task["error"]
