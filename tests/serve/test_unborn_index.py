"""An index is born with its first commit, not with its manifest: ``Index.create`` writes an empty manifest once an
upload's source is staged, and a first upload cancelled, interrupted or failed after that still leaves no folder,
record or name behind, while a search naming the index gets the 409 ``index_empty`` until a commit lands. One with a
committed shard (or a manifest that cannot be read) is never removed. Real uploads accepted by ``Service`` (real
SQLite task store), the empty manifest written by the store's own ``Index.create``."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from operators.errors import SpecError
from operators.store import Index, IndexSettings
from serve.tasks import taskrunner
from serve.http.errors import ApiError
from serve.indices.index_owner import born
from serve.tasks.ingest_task import run_ingest
from tests.serve.test_cancelled_upload import assert_gone_and_free
from tests.serve.conftest import upload


def created(job: dict) -> Path:
    """The empty manifest the upload's ingestion writes before its first commit (``Index.create``)."""
    path = Path(job["index_path"])
    Index.create(path, IndexSettings(dense=False))
    assert (path / "manifest.json").is_file() and not born(path)
    return path


def committed(path: Path) -> None:
    """One shard committed into the index at ``path``, as the upload's first commit would."""
    Index.open(path).add(pa.table({"docno": ["bees#0"], "doc_id": ["bees"], "title": ["Bees"],
                                   "text": ["honey bees make honey from nectar"]}))
    assert born(path)


def search_refused(service, tenant: str = "alice") -> ApiError:
    with pytest.raises(ApiError) as err:
        service.prepare({"query": "honey", "flow": "bm25", "index": "notes"}, tenant, search=True)
    return err.value


def test_a_search_of_an_index_with_only_an_empty_manifest_is_index_empty(upload_service):
    task_id, job = upload(upload_service, "notes", "alice")
    created(job)
    err = search_refused(upload_service)
    assert (err.status, err.code, err.param) == (409, "index_empty", "index") and task_id in err.message
    assert search_refused(upload_service, "bob").code == "index_not_shared"
    committed(Path(job["index_path"]))
    upload_service.prepare({"query": "honey", "flow": "bm25", "index": "notes"}, "alice", search=True)  # no 409


def test_a_first_upload_cancelled_after_its_empty_manifest_is_written_is_removed(upload_service):
    task_id, job = upload(upload_service, "notes", "alice")
    created(job)
    assert upload_service.store.finish(task_id, "cancelled", log="cancelled by the client")  # as Service.cancel does
    taskrunner.discard_leftovers(upload_service.store.task(task_id, None), upload_service.store)
    assert_gone_and_free(upload_service, task_id, job)


def test_a_first_upload_interrupted_after_its_empty_manifest_is_written_is_removed(upload_service):
    task_id, job = upload(upload_service, "notes", "alice")
    created(job)
    assert taskrunner.interrupted(upload_service.store, task_id, taskrunner.INTERRUPTED)
    assert_gone_and_free(upload_service, task_id, job)


@pytest.mark.ray  # whether the task's actor lives is asked of Ray
def test_a_replica_starting_removes_a_cancelled_first_upload_with_an_empty_manifest(ray_session, upload_service):
    task_id, job = upload(upload_service, "notes", "alice")
    created(job)
    assert upload_service.store.finish(task_id, "cancelled")
    assert taskrunner.recover(upload_service.store) == 0
    assert_gone_and_free(upload_service, task_id, job)


def test_a_cancelled_first_upload_whose_worker_still_holds_the_ingest_lock_stays_until_it_lets_go(upload_service):
    """Ray may stop listing a killed worker before its process exits: while it holds the ingest lock it may still
    commit, so the empty index stays; once the lock is free the next clean-up (the watcher's, ``recover``'s) removes
    it."""
    from flows.ingestion.running import Running

    task_id, job = upload(upload_service, "notes", "alice")
    path = created(job)
    assert upload_service.store.finish(task_id, "cancelled")
    with Running(path):
        taskrunner.discard_leftovers(upload_service.store.task(task_id, None), upload_service.store, wait_s=0.0)
        assert (path / "owner.json").is_file() and upload_service.store.index("notes")["owner"] == "alice"
    taskrunner.discard_leftovers(upload_service.store.task(task_id, None), upload_service.store, wait_s=0.0)
    assert_gone_and_free(upload_service, task_id, job)


@pytest.mark.parametrize("end", ["cancelled", "interrupted"])
def test_an_upload_ended_after_a_commit_keeps_the_index(upload_service, end):
    """A commit may land just before the worker is killed: its documents stay, with the name and the record."""
    task_id, job = upload(upload_service, "notes", "alice")
    path = created(job)
    committed(path)
    if end == "cancelled":
        assert upload_service.store.finish(task_id, "cancelled")
        taskrunner.discard_leftovers(upload_service.store.task(task_id, None), upload_service.store)
    else:
        assert taskrunner.interrupted(upload_service.store, task_id, taskrunner.INTERRUPTED)
    assert Index.open(path).counts()["live_chunks"] == 1
    assert upload_service.store.index("notes")["owner"] == "alice"
    assert [e["chunks"] for e in upload_service.indices.listing("alice") if e["name"] == "notes"] == [1]


def test_an_index_whose_documents_were_all_deleted_and_compacted_away_stays(upload_service):
    """No shard is listed any more, but the index had commits: it is born, and a cancelled upload keeps it."""
    task_id, job = upload(upload_service, "notes", "alice")
    path = created(job)
    committed(path)
    index = Index.open(path)
    index.delete(["bees"])
    index.compact()
    assert Index.open(path).counts()["shards"] == 0 and born(path)
    assert upload_service.store.finish(task_id, "cancelled")
    taskrunner.discard_leftovers(upload_service.store.task(task_id, None), upload_service.store)
    assert path.is_dir() and upload_service.store.index("notes")["owner"] == "alice"


def test_an_index_whose_manifest_cannot_be_read_is_never_removed(upload_service):
    task_id, job = upload(upload_service, "notes", "alice")
    path = created(job)
    (path / "manifest.json").write_text("{not json")
    assert born(path)
    assert upload_service.store.finish(task_id, "cancelled")
    taskrunner.discard_leftovers(upload_service.store.task(task_id, None), upload_service.store)
    assert (path / "manifest.json").read_text() == "{not json"
    assert upload_service.store.index("notes")["owner"] == "alice"


def test_an_index_whose_manifest_is_lost_but_shards_remain_is_never_removed(upload_service):
    """A lost manifest.json is damage, not an empty index: the committed shard folder stays with its documents."""
    task_id, job = upload(upload_service, "notes", "alice")
    path = created(job)
    committed(path)
    (path / "manifest.json").unlink()
    shards = sorted(p.name for p in (path / "shards").iterdir())
    assert shards and born(path)
    with pytest.raises(SpecError) as damaged:  # a search says what is wrong, without the server's path
        upload_service.prepare({"query": "honey", "flow": "bm25", "index": "notes"}, "alice", search=True)
    assert "1 shard folder(s) but its manifest.json is lost" in str(damaged.value)
    assert str(path.parent) not in str(damaged.value)
    assert upload_service.store.finish(task_id, "cancelled")
    taskrunner.discard_leftovers(upload_service.store.task(task_id, None), upload_service.store)
    assert sorted(p.name for p in (path / "shards").iterdir()) == shards
    assert upload_service.store.index("notes")["owner"] == "alice"


@pytest.mark.integration  # MiniLM loads in this process
def test_a_first_upload_that_fails_after_its_empty_manifest_is_written_is_removed(upload_service):
    """The run stages the source and creates the index, then cannot write its shard (``shards`` is a file)."""
    task_id, job = upload(upload_service, "notes", "alice")
    (Path(job["index_path"]) / "shards").write_text("in the way")
    run_ingest(upload_service.store, task_id, job)
    task = upload_service.store.task(task_id, None)
    assert task["status"] == "failed", task
    assert_gone_and_free(upload_service, task_id, job)
