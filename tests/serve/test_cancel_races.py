"""A task that ends, and is deleted, while a cancel or a progress read of it is on its way: the answer is the 404
``Task id not found`` of a task that is gone, not a 500 from reading the status of a row that is no longer there.

Each race is made to happen: the cancel commits nothing until the task's worker has finished it (the store's
``finish`` is wrapped to wait for that), and a real ``DELETE /task/{id}`` over HTTP lands before the cancel reads the
task again; a progress read that fails an unfinished task whose worker is gone (``interrupted``) has the task deleted
before it reads the task again. Real HTTP on 127.0.0.1 (the service's FastAPI app under uvicorn), a real SQLite task
store, the task on a real Ray actor."""

from __future__ import annotations

import time

import httpx
import pytest

from serve.tasks import taskrunner
from serve.tasks.taskstore import FINAL
from tests.serve.conftest import two_document_index

pytestmark = [pytest.mark.ray, pytest.mark.slow]


@pytest.fixture
def base(ray_session, upload_service):
    from tests.serve.conftest import api_on_localhost

    two_document_index(upload_service.indices.folder / "news")
    with api_on_localhost() as url:
        yield url


def assert_task_not_found(response: httpx.Response) -> None:
    assert response.status_code == 404, response.text
    assert (response.json()["error"]["param"], response.json()["error"]["code"]) == ("id", "task_not_found")


def test_a_cancel_of_a_task_that_finished_and_was_deleted_meanwhile_is_a_404(base, upload_service, monkeypatch):
    store, deletes = upload_service.store, []
    real = store.finish

    def finished_first(task_id, status, **kwargs):
        if status == "cancelled" and not deletes:
            deadline = time.monotonic() + 120
            while store.task(task_id, None)["status"] not in FINAL:  # the worker finishes the task meanwhile
                assert time.monotonic() < deadline, "the task did not finish"
                time.sleep(0.05)
            done = real(task_id, status, **kwargs)
            deletes.append(httpx.delete(f"{base}/task/{task_id}", timeout=60))
            return done
        return real(task_id, status, **kwargs)

    monkeypatch.setattr(store, "finish", finished_first)
    queued = httpx.post(f"{base}/task/enqueue", json={"flow": "bm25", "query": "honey", "index": "news"}, timeout=60)
    assert queued.status_code == 200, queued.text
    cancelled = httpx.get(f"{base}/task/cancel/{queued.text}", timeout=180)
    assert [d.status_code for d in deletes] == [200], [d.text for d in deletes]
    assert_task_not_found(cancelled)


def test_a_progress_read_of_a_task_interrupted_and_deleted_meanwhile_is_a_404(base, upload_service, monkeypatch):
    """A running task whose worker is gone (the service was killed): the read fails it as interrupted, and the now
    ended task is deleted before the read reads it again."""
    store, deletes = upload_service.store, []
    task_id = store.create_task("local", "bm25", {"steps": {}}, [{"qid": "1", "query": "honey"}], ["bm25"])
    assert store.update(task_id, status="running", created=time.time() - 3600)  # long past its launch, no worker
    real = taskrunner.reconcile

    def then_deleted(store_, task):
        interrupted = real(store_, task)
        deletes.append(httpx.delete(f"{base}/task/{task['id']}", timeout=60))
        return interrupted

    monkeypatch.setattr(taskrunner, "reconcile", then_deleted)
    read = httpx.get(f"{base}/task/progress/{task_id}", timeout=60)
    assert [d.status_code for d in deletes] == [200], [d.text for d in deletes]
    assert_task_not_found(read)
