"""A task's Ray worker (``serve.tasks.taskrunner.TaskWorker``) on the session's Ray, without Serve: when the task's code
raises outside its flow's own error handling, the task fails with that error (and an upload's file is removed)
before the worker exits, rather than being reported as ``interrupted ... ActorDiedError`` with the error lost. A
worker that goes back to a replica runs task after task in one process, up to its bound; and asking whether a task's
worker lives logs nothing when none does (``ray.get_actor`` logged a warning for each absent name)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]


class Replica:
    """Stands for the Serve replica that workers go back to (a real actor: they watch it)."""


def test_a_task_whose_code_fails_outside_its_flow_fails_with_its_error(ray_session, tmp_path):
    from serve.tasks import taskrunner
    from serve.tasks.taskstore import TaskStore

    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    store = TaskStore(url)
    upload = tmp_path / "upload.jsonl"
    upload.write_text('{"_id": "a", "text": "honey"}\n')
    job = {"ingest": {"index": "news", "index_path": str(tmp_path / "home" / "indices" / "news"), "source": str(upload),
                      "staging": str(tmp_path / "staging")}, "documents": 1}  # as an upload's, less its spec
    task_id, why = store.create_ingest_task("alice", "news", "ingest", job, ["staging", "ingest"], limit=5)
    assert why == "ok"
    ref = taskrunner.launch(task_id, url, env={"TESSERA_HOME": str(tmp_path / "home")}, num_cpus=0,
                            max_result_rows=10, replica=ray_session.remote(num_cpus=0)(Replica).remote())
    with pytest.raises(ray_session.exceptions.RayActorError):  # a worker whose task raised is not reused
        ray_session.get(ref, timeout=300)
    task = store.task(task_id, "alice")
    assert task["status"] == "failed" and task["error"] == "KeyError: 'spec'", task
    assert not upload.exists()
    assert not taskrunner.alive(task_id)


def flow_task(store, index: str, k: str | int = 3, task_id: str | None = None) -> str:
    spec = {"name": "bm25", "steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": k, "index": index}}}}
    return store.create_task("alice", "bm25", spec, [{"qid": "1", "query": "honey bees"}], ["bm25"], task_id=task_id)


def test_a_worker_runs_tasks_in_a_row_in_one_process_and_retires_after_its_bound(ray_session, tmp_path,
                                                                                   sample_index):
    from serve.tasks import task_registry, taskrunner
    from serve.tasks.taskstore import TaskStore

    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    store, replica = TaskStore(url), ray_session.remote(num_cpus=0)(Replica).remote()
    before = task_registry.live_workers()
    run = dict(env={"TESSERA_HOME": str(tmp_path / "home")}, num_cpus=0, max_result_rows=10, replica=replica,
               max_tasks=3)
    first = flow_task(store, str(sample_index))
    worker = ray_session.get(taskrunner.launch(first, url, **run), timeout=300)  # back: it may run another
    assert store.task(first, None)["status"] == "finished" and not taskrunner.alive(first)
    assert task_registry.live_workers() - before == {worker}
    pids = []
    for k, status in (("many", "failed"), (2, "finished")):  # a task that failed leaves its worker reusable too
        waiting = taskrunner.wait_for(worker)  # what serve.tasks.spare does with a worker back from its task
        pids.append(ray_session.get(task_registry.handle(waiting).pid.remote()))
        task_id = flow_task(store, str(sample_index), k, task_id=waiting)  # the next task takes the spare's id
        ref = taskrunner.launch(task_id, url, **run)
        if len(pids) == 1:
            assert ray_session.get(ref, timeout=300) == worker
        else:  # its third task, the bound: it exits
            with pytest.raises(ray_session.exceptions.RayActorError):
                ray_session.get(ref, timeout=300)
        assert store.task(task_id, None)["status"] == status
    assert pids[0] == pids[1]
    assert task_registry.live_workers() - before == set()  # retired, and no other worker was started


def core_warnings(pid: int) -> list[str]:
    """The "Failed to look up actor" lines in this process's Ray core log (where ``ray.get_actor`` logs them)."""
    import ray

    logs = Path(ray._private.worker._global_node.get_logs_dir_path())
    return [line for path in logs.glob(f"python-core-driver-*_{pid}.log")
            for line in path.read_text(errors="replace").splitlines() if "Failed to look up actor" in line]


def test_reading_a_task_whose_worker_has_not_started_logs_no_warning(ray_session, upload_service):
    """A queued task without a worker yet, read the way ``GET /task/progress`` reads it (``Service.task``), asked
    whether its worker lives and cancelled (``stop``): no warning, where ``ray.get_actor`` logged one each time."""
    from serve.tasks import taskrunner

    store = upload_service.store
    task_id = store.create_task("alice", "bm25", {}, [{"qid": "1", "query": "honey"}], ["bm25"])
    seen = core_warnings(os.getpid())
    for _ in range(3):
        assert upload_service.task(task_id, "alice")["status"] == "queued"  # within the launch grace
    assert not taskrunner.alive(task_id) and taskrunner.stop(task_id)
    control = f"control-{uuid.uuid4().hex}"  # an absent name looked up the old way: its warning ends the check
    with pytest.raises(ValueError):
        ray_session.get_actor(control, namespace=taskrunner.NAMESPACE)
    deadline = time.monotonic() + 60
    while not any(control in line for line in core_warnings(os.getpid())):
        assert time.monotonic() < deadline, "Ray's warning for an absent actor never reached the core log"
        time.sleep(0.2)
    new = [line for line in core_warnings(os.getpid()) if line not in seen]
    assert len(new) == 1 and control in new[0], new
