"""A task's Ray actor (``serve.taskrunner.TaskWorker``) on the session's Ray, without Serve: when the task's code
raises outside its flow's own error handling, the task fails with that error (and an upload's file is removed)
before the actor exits, rather than being reported as ``interrupted ... ActorDiedError`` with the error lost."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_a_task_whose_code_fails_outside_its_flow_fails_with_its_error(ray_session, tmp_path):
    from serve import taskrunner
    from serve.taskstore import TaskStore

    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    store = TaskStore(url)
    upload = tmp_path / "upload.jsonl"
    upload.write_text('{"_id": "a", "text": "honey"}\n')
    job = {"ingest": {"index": "news", "source": str(upload), "staging": str(tmp_path / "staging")}, "documents": 1}
    task_id, why = store.create_ingest_task("alice", "news", "ingest", job, ["staging", "ingest"], limit=5)
    assert why == "ok"
    ref = taskrunner.launch(task_id, url, env={"TESSERA_HOME": str(tmp_path / "home")}, num_cpus=0,
                            max_result_rows=10)
    try:
        ray_session.get(ref, timeout=300)
    except ray_session.exceptions.RayActorError:
        pass  # the actor exits after every task (it is detached: nothing else ends it)
    task = store.task(task_id, "alice")
    assert task["status"] == "failed" and task["error"] == "KeyError: 'spec'", task
    assert not upload.exists()
