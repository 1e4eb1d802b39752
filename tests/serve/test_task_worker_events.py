"""A task worker's calls leave no task events in Ray's GCS. Ray keeps an event record of every call of an actor
whose task events are on, about 3.6 KB each (benchmarks/gcs_task_events.py), up to 100,000 of them
(``task_events_max_num_task_in_gcs``): a service running 200 tasks a minute grew its GCS by 0.7 MB/min for hours
(docs/results.md, a long soak). Serve turns them off for its own actors; ``serve.tasks.taskrunner`` now does for the
task workers it starts, spares reached through ``ray.get_actor`` included."""

from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def local_actor(ray, name: str):
    """An actor of a class made here: Ray ships it by value (workers cannot import this test module; tests/serve is
    not the ``serve`` package). ``Replica`` stands for the Serve replica workers go back to (they watch it);
    ``Control`` has Ray's default task events, so its call shows that events reach the GCS in this session."""

    class Replica:
        pass

    class Control:
        def ping(self) -> str:
            return "pong"

    return ray.remote(num_cpus=0)({"Replica": Replica, "Control": Control}[name]).remote()


def gcs_events_by_class() -> dict[str, int]:
    """Task events the GCS holds, counted by the class (or function) of their task."""
    from ray._private.state import state

    counts: dict[str, int] = {}
    for event in state._get_all_task_events():
        name = event.task_info.func_or_class_name
        counts[name] = counts.get(name, 0) + 1
    return counts


def test_task_worker_calls_leave_no_task_events_in_the_gcs(ray_session, tmp_path, sample_index):
    from serve.tasks import task_registry, taskrunner
    from serve.tasks.taskstore import TaskStore

    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    store, replica = TaskStore(url), local_actor(ray_session, "Replica")
    spec = {"name": "bm25", "steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 2, "index": str(sample_index)}}}}
    run = dict(env={"TESSERA_HOME": str(tmp_path / "home")}, num_cpus=0, max_result_rows=10, replica=replica,
               max_tasks=2)
    first = store.create_task("alice", "bm25", spec, [{"qid": "1", "query": "honey bees"}], ["bm25"])
    worker = ray_session.get(taskrunner.launch(first, url, **run), timeout=300)  # a new worker, its own handle
    waiting = taskrunner.wait_for(worker)  # back as a spare: the next task reaches it through ray.get_actor
    ray_session.get(task_registry.handle(waiting).pid.remote(), timeout=60)
    second = store.create_task("alice", "bm25", spec, [{"qid": "1", "query": "bees"}], ["bm25"], task_id=waiting)
    with pytest.raises(ray_session.exceptions.RayActorError):  # its second task, its bound: it exits
        ray_session.get(taskrunner.launch(second, url, **run), timeout=300)
    assert [store.task(t, None)["status"] for t in (first, second)] == ["finished", "finished"]

    control = local_actor(ray_session, "Control")
    assert ray_session.get(control.ping.remote()) == "pong"
    deadline = time.monotonic() + 60
    counts = gcs_events_by_class()
    while not [name for name in counts if "Control" in name]:  # the events are sent every second
        assert time.monotonic() < deadline, f"the control actor's call never reached the GCS: {counts}"
        time.sleep(0.5)
        counts = gcs_events_by_class()
    assert {name: n for name, n in counts.items() if "TaskWorker" in name} == {}
    ray_session.kill(control)
    ray_session.kill(replica)
