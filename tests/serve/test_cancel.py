"""``/task/cancel`` on a task that has ended: a cancelled one again is a success (a client may retry), a finished
or failed one a 409 naming its state (it used to say ``Success`` and change nothing). Through ``Service.cancel`` over
a real SQLite task store; the tasks have ended, so no Ray."""

from __future__ import annotations

import pytest

from serve.http.errors import ApiError
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve


@pytest.fixture
def service(tmp_path):
    args = ServiceArgs(default_index=str(tmp_path / "none"), task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    return Service(resolve(args, environ={}), [], "tessera")


def ended(service: Service, status: str) -> str:
    task_id = service.store.create_task("alice", "bm25", {}, [{"qid": "1", "query": "honey"}], ["bm25"])
    assert service.store.finish(task_id, status)
    return task_id


def test_a_cancelled_task_cancelled_again_is_a_success(service):
    task_id = ended(service, "cancelled")
    service.cancel(task_id, "alice")
    assert service.store.task(task_id, "alice")["status"] == "cancelled"


@pytest.mark.parametrize("status", ["finished", "failed"])
def test_a_task_that_has_ended_is_not_cancelled_and_the_409_says_its_state(service, status):
    task_id = ended(service, status)
    with pytest.raises(ApiError) as err:
        service.cancel(task_id, "alice")
    assert (err.value.status, err.value.code, err.value.param) == (409, "task_ended", "id")
    assert f"has already {status}" in err.value.message
    assert service.store.task(task_id, "alice")["status"] == status  # unchanged
    with pytest.raises(ApiError) as err:  # another tenant's task is not found, ended or not
        service.cancel(task_id, "bob")
    assert err.value.status == 404
