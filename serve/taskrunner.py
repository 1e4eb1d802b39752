"""Tasks run on Ray, never in the HTTP replica: one detached, named actor per task.

The replica writes the task (queued) to the task store and starts ``TaskWorker``
named ``task-<id>`` in the ``tessera-tasks`` namespace; the actor reads the task back,
runs its flow with the local executor (steps placed on Serve deployments stay there),
writes progress and the result to the store, and exits. Any replica can find the actor
by name, so:

* cancel commits ``cancelled`` in the store, then kills the actor (``ray.kill``): the
  flow's work stops with its process, and whatever the worker tried to write after the
  commit is refused by the store (writes are conditional on an unfinished task);
* a task that is unfinished in the store while no actor of that name lives (the
  service was killed, the node died) is failed with the reason ``interrupted`` when a
  replica starts, and whenever its progress is read.
"""

from __future__ import annotations

import time
from typing import Any

from serve.taskstore import PROGRESS_EVERY_S, TaskStore, pending_progress

NAMESPACE = "tessera-tasks"
#: A queued task gets this long for its actor to appear before it counts as interrupted.
LAUNCH_GRACE_S = 10.0
INTERRUPTED = "interrupted (the worker running the task stopped: the service was restarted or the worker died)"


def actor_name(task_id: str) -> str:
    return f"task-{task_id}"


class ProgressWriter:
    """The executor's progress callback: step states, counters and log lines into the store.

    A refused write means the task was finished elsewhere (cancelled): the run is then told to stop."""

    def __init__(self, store: TaskStore, task_id: str, steps: list[str], cancel: Any):
        self.store, self.task_id, self.cancel = store, task_id, cancel
        self.progress = pending_progress(steps)
        self.started: dict[str, float] = {}
        self.steps_done = 0
        self.written = 0.0

    def __call__(self, event: Any) -> None:
        step, line = event.step, None
        if step is None or step not in self.progress:
            return
        info = self.progress[step]
        if step not in self.started:
            self.started[step] = time.perf_counter()
            info["status"] = "running"
            line = f"step '{step}' ({event.op}) started"
        info["rows_out"] = event.step_rows_done
        info["seconds"] = round(time.perf_counter() - self.started[step], 3)
        if event.steps_done > self.steps_done:
            self.steps_done = event.steps_done
            info["status"] = "done"
            line = f"step '{step}' done: {event.step_rows_done} rows in {info['seconds']:.2f} s"
        if line is None and time.perf_counter() - self.written < PROGRESS_EVERY_S:
            return
        self.written = time.perf_counter()
        if not self.store.update(self.task_id, log=line, current_step=step, steps_done=self.steps_done,
                                 rows_done=event.rows_done, step_progress=self.progress):
            self.cancel.cancel("the task was finished elsewhere (cancelled)")


def run_task(store: TaskStore, task_id: str, max_result_rows: int) -> None:
    """Run one stored task to a final state (whatever happens, the store ends final or refuses the write)."""
    import pyarrow as pa

    from flows.executors import make_executor
    from flows.progress import CancelToken
    from flows.spec import FlowSpec
    from operators.errors import FlowCancelled, TesseraError
    from serve.results import task_result

    row = store.task(task_id, None)
    if row is None or not store.update(task_id, status="running", log="running on Ray"):
        return  # cancelled before it started
    if "ingest" in row["spec"]:  # an upload's ingestion (serve.indices); a flow spec has no such key
        from serve.ingest_task import run_ingest

        run_ingest(store, task_id, row["spec"]["ingest"])
        return
    token = CancelToken()
    try:
        flow = FlowSpec.parse(row["spec"]).build()
        queries = pa.table({"qid": [q["qid"] for q in row["queries"]], "query": [q["query"] for q in row["queries"]]},
                           schema=pa.schema([("qid", pa.string()), ("query", pa.string())]))
        result = make_executor("local", keep_history=False).run(
            flow, queries, progress=ProgressWriter(store, task_id, row["steps"], token), cancel=token)
    except FlowCancelled:
        store.finish(task_id, "cancelled")
    except TesseraError as err:
        store.finish(task_id, "failed", error=str(err))
    except Exception as err:  # noqa: BLE001  (a task fails with the reason; the service goes on)
        store.finish(task_id, "failed", error=f"{type(err).__name__}: {err}")
    else:
        if result.table.num_rows > max_result_rows:
            store.finish(task_id, "failed", error=f"max_result_rows: the result has {result.table.num_rows} rows, "
                         f"over the limit max_result_rows={max_result_rows}; keep fewer (a postprocess.reduce step)")
        else:
            store.finish(task_id, "finished", result=task_result(result))


class TaskWorker:
    """The Ray actor of one task (made remote by ``launch``)."""

    def __init__(self, store_url: str):
        self.store = TaskStore(store_url)

    def run(self, task_id: str, max_result_rows: int) -> None:
        import ray

        try:
            run_task(self.store, task_id, max_result_rows)
        finally:
            ray.actor.exit_actor()  # detached: nothing else ends it


def launch(task_id: str, store_url: str, *, env: dict[str, str], num_cpus: float, max_result_rows: int) -> Any:
    """Start the task's actor (with the app's ``$TESSERA_HOME`` and outbound policy in ``env``); returns the
    ``run`` call's ObjectRef."""
    import ray

    worker = ray.remote(TaskWorker).options(name=actor_name(task_id), namespace=NAMESPACE, lifetime="detached",
                                             num_cpus=num_cpus, max_restarts=0,
                                             runtime_env={"env_vars": env})
    return worker.remote(store_url).run.remote(task_id, max_result_rows)


def alive(task_id: str) -> bool:
    import ray

    try:
        ray.get_actor(actor_name(task_id), namespace=NAMESPACE)
    except ValueError:
        return False
    return True


def stop(task_id: str, wait_s: float = 5.0) -> None:
    """Kill the task's actor, if it lives, and wait up to ``wait_s`` for it to be gone: its step work ends with its
    process, so what it wrote can then be cleaned up."""
    import ray

    try:
        actor = ray.get_actor(actor_name(task_id), namespace=NAMESPACE)
    except ValueError:
        return
    ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + wait_s
    while alive(task_id) and time.monotonic() < deadline:
        time.sleep(0.05)


def reconcile(store: TaskStore, task: dict[str, Any]) -> bool:
    """Fail an unfinished task whose actor is gone with the reason ``interrupted``; True if it did."""
    if task["status"] not in ("queued", "running") or alive(task["id"]):
        return False
    if task["status"] == "queued" and time.time() - task["created"] < LAUNCH_GRACE_S:
        return False  # its actor may be starting
    return interrupted(store, task["id"], INTERRUPTED)


def interrupted(store: TaskStore, task_id: str, error: str) -> bool:
    """Fail an unfinished task whose worker stopped; an upload's ingestion also loses its uploaded file and staging
    folder (the service never resumes one). True if the task was unfinished."""
    if not store.finish(task_id, "failed", error=error):
        return False
    row = store.task(task_id, None)
    if row is not None:
        discard_leftovers(row)
    return True


def discard_leftovers(task: dict[str, Any]) -> None:
    """What a task that ended before its worker finished leaves behind: an upload's file and staging folder."""
    if "ingest" in task["spec"]:
        from serve.ingest_task import discard_upload

        discard_upload(task["spec"]["ingest"])


def recover(store: TaskStore) -> int:
    """At replica start: every unfinished task without a live actor reaches ``failed`` (interrupted)."""
    return sum(reconcile(store, task) for task in store.unfinished())
