"""A replica's pool of spare task workers (``serve.tasks.spare.SpareWorkers``) under concurrent tasks, on the session's
Ray with real task workers and tasks, without Serve (a plain actor stands for the replica they go back to): every
worker back from a burst is kept, so the next burst of as many tasks starts no process; a spare beyond
``spare_task_workers`` is retired once idle, its process gone at once; a full pool retires the spare that waited
longest; a spare lent to a request that made no task is taken first again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def replica_stand_in(ray):
    """An actor standing for the Serve replica that workers go back to (they watch it). Its class is local, so
    Ray ships it by value: workers cannot import this test module (tests/serve is not the ``serve`` package)."""

    class Replica:
        pass

    return ray.remote(num_cpus=0)(Replica).remote()


def flow_task(store, index: str, task_id: str | None) -> str:
    spec = {"name": "bm25", "steps": {"bm25": {"op": "retrieve.bm25", "params": {"k": 2, "index": index}}}}
    return store.create_task("alice", "bm25", spec, [{"qid": "1", "query": "honey bees"}], ["bm25"], task_id=task_id)


def burst(ray, pool, store, index: str, count: int) -> list[str]:
    """``count`` tasks made and launched at once, as ``Service.enqueue`` does; the workers that ran them, each back
    in the pool (``Service._watch``)."""
    from serve.tasks import taskrunner

    refs, tasks = [], []
    for _ in range(count):
        with pool.lend() as lent:
            task_id = flow_task(store, index, lent.task_id)
            lent.made = True
        tasks.append(task_id)
        refs.append(taskrunner.launch(task_id, pool.store_url, env=pool.env, num_cpus=0, max_result_rows=10,
                                      replica=pool.replica))
    workers = ray.get(refs, timeout=300)
    for worker in workers:
        pool.returned(worker)
    assert [store.task(task_id, None)["status"] for task_id in tasks] == ["finished"] * count
    return workers


def running(pid: int) -> bool:
    """Whether the process lives (a zombie does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def pids(ray, pool) -> dict[str, int]:
    """Spare's task id to its worker's process id."""
    from serve.tasks import task_registry

    return {task_id: ray.get(task_registry.handle(task_id).pid.remote()) for task_id in pool.waiting()}


def wait_until(check, timeout: float, what: str) -> float:
    """Seconds until ``check()`` held."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < timeout, what
        time.sleep(0.1)
    return time.monotonic() - start


@pytest.fixture
def make_pool(ray_session, tmp_path):
    from serve.tasks import taskrunner
    from serve.tasks.spare import SpareWorkers
    from serve.tasks.taskstore import TaskStore

    made = []

    def make(**options) -> SpareWorkers:
        url = f"sqlite:///{tmp_path / 'tasks.db'}"
        pool = SpareWorkers(url, env={"TESSERA_HOME": str(tmp_path / "home")}, num_cpus=0,
                            replica=replica_stand_in(ray_session), **options)
        pool.store = TaskStore(url)
        made.append(pool)
        pool.refill()  # the replica's start: ``count`` new spares
        for task_id in pool.waiting():
            ray_session.get(taskrunner.handle(task_id).ready.remote(), timeout=300)
        return pool

    yield make
    for pool in made:
        for task_id in pool.waiting():
            taskrunner.stop(task_id, wait_s=0)
            taskrunner.release(task_id)
        ray_session.kill(pool.replica)


def test_a_second_burst_reuses_every_worker_and_the_surplus_retires_when_idle(ray_session, make_pool, sample_index):
    from serve.tasks import task_registry

    before = task_registry.live_workers()
    pool = make_pool(count=1, idle_s=6.0)
    first = burst(ray_session, pool, pool.store, str(sample_index), 3)
    started = task_registry.live_workers() - before
    assert len(started) == 3 and set(first) == started  # the spare and two new workers
    assert len(pool.waiting()) == 3  # all back: none retired
    for _ in range(2):
        again = burst(ray_session, pool, pool.store, str(sample_index), 3)
        assert set(again) == started and task_registry.live_workers() - before == started  # no new process
    processes = pids(ray_session, pool)
    waited = wait_until(lambda: len(pool.waiting()) == 1, 60, "the idle spares beyond spare_task_workers stayed")
    assert waited > 4.0  # not before they waited idle_s (less the seconds the pid look-ups took)
    (kept,) = pool.waiting()
    gone = [pid for task_id, pid in processes.items() if task_id != kept]
    wait_until(lambda: not any(map(running, gone)), 5, "a retired worker's process lingered")
    assert running(processes[kept])
    wait_until(lambda: len(task_registry.live_workers() - before) == 1, 10, "Ray still lists a retired worker")


def test_a_full_pool_retires_the_spare_that_waited_longest(ray_session, make_pool, sample_index):
    from serve.tasks import task_registry

    before = task_registry.live_workers()
    pool = make_pool(count=1, keep_at_most=2)
    oldest, middle, newest = burst(ray_session, pool, pool.store, str(sample_index), 3)
    wait_until(lambda: task_registry.live_workers() - before == {middle, newest}, 10, "the full pool kept 3")
    spares = pool.waiting()
    assert [task_registry.worker_of(task_id) for task_id in spares] == [newest, middle]  # most recent first
    with pool.lend() as lent:  # a request refused before its task is made: the spare is the next one again
        assert lent.task_id == spares[0]
    assert pool.waiting() == spares
