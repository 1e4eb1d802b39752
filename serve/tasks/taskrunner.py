"""Tasks run on Ray, never in the HTTP replica: on detached task workers, each running one task at a time.

The replica writes the task (queued) to the task store and runs it on a ``TaskWorker``, a detached actor named
``worker-<hex>`` in the ``tessera-tasks`` namespace; ``serve.tasks.task_registry`` records which worker runs which
task, in Ray's key-value store, so any replica finds a task's worker. The worker reads the task back, runs its flow
with the local executor (steps placed on Serve deployments stay there) and writes progress and the result to the store.

A worker is reused: one whose task finished or failed goes back to its replica as the next spare (``run`` returns its
name; ``serve.tasks.spare`` gives it a new task id) until it has run ``max_tasks`` tasks, then it exits, as does one
whose task ended otherwise (cancelled, or raised outside its flow). A process per task left one core-worker log per
task in Ray's session folder (37 MB/h at 15 tasks/min) and a dead actor per task in the GCS. What a worker keeps
between tasks is process-wide on purpose (models, indices, imports); nothing of a tenant's stays (the replica checked
what a spec may read before the task was made, and the caches are keyed by path and params). So:

* cancel commits ``cancelled`` in the store, then kills the worker (``ray.kill``): the flow's work stops with its
  process, and whatever the worker tried to write after the commit is refused by the store (writes are conditional
  on an unfinished task);
* a task that is unfinished in the store while no worker of it lives (the service was killed, the node died) is
  failed with the reason ``interrupted`` when a replica starts, and whenever its progress is read; an upload's
  ingestion so failed also loses its file and, for a first upload (no documents committed), the index it made;
* a cancelled upload loses its file at once, and its staged files, the ``_ingest/running.lock`` its killed run left
  and, for a first upload, the index it made once its worker is known to be gone: when ``stop`` saw it die, else
  when the replica watching the task sees its worker end (``interrupted``), else at the next replica start
  (``recover``). Ray stops listing a killed worker a moment before its process exits: the clean-up waits (a few
  seconds at most) for the run's lock on the index to be free (``serve.tasks.ingest_task.discard_stopped_upload``).

A new process and its imports took about 2 s of a one-query task's 2.4 s, so a replica keeps a *spare*: a worker
waiting for a task id that no task has yet (``prestart``, or a worker back from its task), its imports done. The
replica's next task takes that id (``serve.tasks.spare``), and ``launch`` finds the worker by it. A spare whose replica
is gone exits within seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from operators.errors import one_line
# alive, stop, release: a task's worker, for the service, ``serve.tasks.spare`` and the tests too
from serve.tasks.task_registry import NAMESPACE, alive, assign, forget, handle, new_worker_name, release, stop  # noqa: F401
from serve.tasks import kept_failures
from serve.tasks.refused_writes import failure, finish_with_result
from serve.tasks.task_rows import WriteThrottle, new_task_id, pending_progress
from serve.tasks.taskstore import TaskStore

log = logging.getLogger("tessera.serve")

#: A queued task gets this long for its worker to appear before it counts as interrupted.
LAUNCH_GRACE_S = 10.0
#: How often an idle worker checks that the replica it goes back to still lives.
SPARE_WATCH_S = 2.0
#: The tasks a worker runs before it exits (Celery's max_tasks_per_child): what a process accumulates (models of
#: every flow it ran, allocator fragmentation) is given back now and then.
MAX_TASKS_PER_WORKER = 500
INTERRUPTED = "interrupted (the worker running the task stopped: the service was restarted or the worker died)"


class ProgressWriter:
    """The executor's progress callback: step states, counters and log lines into the store.

    A refused write means the task was finished elsewhere (cancelled): the run is then told to stop."""

    def __init__(self, store: TaskStore, task_id: str, steps: list[str], cancel: Any):
        self.store, self.task_id, self.cancel = store, task_id, cancel
        self.progress = pending_progress(steps)
        self.started: dict[str, float] = {}
        self.steps_done = 0
        self.throttle = WriteThrottle()

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
        if not self.throttle.due(forced=line is not None):
            return
        if not self.store.update(self.task_id, log=line, current_step=step, steps_done=self.steps_done,
                                 rows_done=event.rows_done, step_progress=self.progress):
            self.cancel.cancel("the task was finished elsewhere (cancelled)")

    def record(self, result: Any) -> None:
        """Each step's rows in and out and seconds as the finished run counted them: events carry rows done only,
        and a throttled last event may not have been written."""
        for step, info in self.progress.items():
            if (done := result.steps.get(step)) is not None:
                info.update(rows_in=done.rows_in, rows_out=done.rows_out, seconds=round(done.seconds, 3))
        self.store.update(self.task_id, step_progress=self.progress)


def run_task(store: TaskStore, task_id: str, max_result_rows: int) -> None:
    """Run one stored task to a final state (whatever happens, the store ends final or refuses the write)."""
    import pyarrow as pa

    from flows.executors import make_executor
    from flows.progress import CancelToken
    from flows.spec import FlowSpec
    from operators.errors import FlowCancelled, TesseraError
    from serve.tasks.results import task_result

    row = store.task(task_id, None)
    if row is None or not store.update(task_id, status="running", log="running on Ray"):
        return  # cancelled before it started
    if "ingest" in row["spec"]:  # an upload's ingestion (serve.indices.indices); a flow spec has no such key
        from serve.tasks.ingest_task import run_ingest

        run_ingest(store, task_id, row["spec"]["ingest"])
        return
    if "compact" in row["spec"]:  # an admin's compaction of an index (serve.indices.index_admin)
        from serve.tasks.ingest_task import run_compact

        run_compact(store, task_id, row["spec"]["compact"])
        return
    token = CancelToken()
    try:
        flow = FlowSpec.parse(row["spec"]).build()
        queries = pa.table({"qid": [q["qid"] for q in row["queries"]], "query": [q["query"] for q in row["queries"]]},
                           schema=pa.schema([("qid", pa.string()), ("query", pa.string())]))
        writer = ProgressWriter(store, task_id, row["steps"], token)
        result = make_executor("local", keep_history=False).run(flow, queries, progress=writer, cancel=token)
        writer.record(result)
    except FlowCancelled:
        store.finish(task_id, "cancelled")
    except TesseraError as err:
        store.finish(task_id, "failed", error=str(err))
    except Exception as err:  # noqa: BLE001  (a task fails with the reason; the service goes on)
        store.finish(task_id, "failed", error=failure(task_id, err))
    else:
        if result.table.num_rows > max_result_rows:
            store.finish(task_id, "failed", error=f"max_result_rows: the result has {result.table.num_rows} rows, "
                         f"over the limit max_result_rows={max_result_rows}; keep fewer (a postprocess.reduce step)")
        else:
            finish_with_result(store, task_id, task_result(result, row["queries"]))


def run_to_end(store: TaskStore, task_id: str, max_result_rows: int) -> bool:
    """``run_task``, and when it raises (an import, or an upload's job, outside the flow's own error handling) the
    task fails with that error, in one line, and the traceback goes to the worker's log: a task left unfinished
    would only say the worker died. True when the task ended ``finished`` or ``failed`` by its own code, so its
    worker may run another; False when it was cancelled or raised here (the worker then exits)."""
    try:
        run_task(store, task_id, max_result_rows)
    except Exception as err:  # noqa: BLE001  (the task fails with the reason; the worker exits)
        log.exception("task %s failed outside its flow", task_id)
        error = one_line(failure(task_id, err), 1000)  # a write the disk refused, in words
        try:  # an upload's file, staging folder and, for a first upload, its empty index go too
            interrupted(store, task_id, error)
        except Exception:  # noqa: BLE001  (the store refuses it too: kept, answered and stored later)
            log.exception("task %s: its failure could not be written to the task store", task_id)
            kept_failures.keep(task_id, error)
        return False
    row = store.task(task_id, None)
    return row is not None and row["status"] in ("finished", "failed")


class TaskWorker:
    """A detached Ray actor running tasks one at a time (made remote by ``launch``, or ahead of its task by
    ``prestart``). With a ``replica`` (an actor handle) it goes back to it after each task that ended normally, and
    exits once that replica is gone; without one it exits after its task."""

    def __init__(self, store_url: str, replica: Any = None, max_tasks: int = MAX_TASKS_PER_WORKER,
                 warm: bool = False):
        import ray

        from serve.security.private_files import keep_private

        keep_private()  # the indices its uploads and compactions write are its user's only (not the CLI's umask)
        self.store, self.replica, self.max_tasks = TaskStore(store_url), replica, max_tasks
        self.name = ray.get_runtime_context().get_actor_name()
        self.tasks = 0
        self.running = threading.Event()
        if replica is not None:  # idle, it waits for its next task as long as the replica that gives them lives
            threading.Thread(target=self._exit_without_replica, daemon=True).start()
        if warm:
            warm_up()

    def _exit_without_replica(self) -> None:
        import ray

        while True:
            time.sleep(SPARE_WATCH_S)
            if self.running.is_set():
                continue
            try:
                ray.get(self.replica.__ray_ready__.remote(), timeout=SPARE_WATCH_S)
            except ray.exceptions.RayActorError:  # nobody is left to give this worker a task
                forget(self.name)
                ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
                return
            except ray.exceptions.GetTimeoutError:
                pass  # busy, not gone

    def ready(self) -> bool:
        """Answered once ``__init__`` (a spare's imports) is done."""
        return True

    def pid(self) -> int:
        """The worker's process id (a test's check that two tasks ran in one process)."""
        import os

        return os.getpid()

    def run(self, task_id: str, max_result_rows: int) -> str | None:
        """Run the task; this worker's name when it may run another (the replica makes it a spare again), else the
        worker exits (the caller's ObjectRef raises ``RayActorError``)."""
        import ray

        self.running.set()
        try:
            normal = run_to_end(self.store, task_id, max_result_rows)
        finally:
            self.tasks += 1
            release(task_id)  # from here, a task unfinished in the store has no worker (``reconcile``)
        if normal and self.replica is not None and self.tasks < self.max_tasks:
            self.running.clear()
            return self.name
        ray.actor.exit_actor()  # detached: nothing else ends it
        return None


def warm_up() -> None:
    """What every task imports (flows and the executors, ingestion, every operator module, FAISS and bm25s; about
    1.4 s, no torch), done by a spare before its task comes."""
    import faiss  # noqa: F401

    from operators.bm25s_import import load_bm25s

    load_bm25s()

    import flows.executors  # noqa: F401
    import flows.spec  # noqa: F401
    import serve.tasks.ingest_task  # noqa: F401
    import serve.tasks.results  # noqa: F401
    from operators.registry import all_operators

    all_operators()


def _worker(task_id: str, store_url: str, replica: Any, *, env: dict[str, str], num_cpus: float, max_tasks: int,
            warm: bool) -> Any:
    """A new worker, recorded as the one of ``task_id`` before it starts (so it is never alive without its task)."""
    import ray

    name = new_worker_name()
    assign(task_id, name)
    try:
        # enable_task_events=False: Ray's GCS keeps ~3.6 KB per actor call otherwise, up to 100,000 calls (0.7 MB/min
        # at 200 tasks/min); Serve turns them off for its own actors too (docs/serving.md, No task events)
        return ray.remote(TaskWorker).options(
            name=name, namespace=NAMESPACE, lifetime="detached", num_cpus=num_cpus, max_restarts=0,
            enable_task_events=False, runtime_env={"env_vars": env}).remote(store_url, replica, max_tasks, warm)
    except BaseException:
        release(task_id)
        raise


def launch(task_id: str, store_url: str, *, env: dict[str, str], num_cpus: float, max_result_rows: int,
           replica: Any = None, max_tasks: int = MAX_TASKS_PER_WORKER) -> Any:
    """Run the task on the spare waiting for its id, else on a new worker (with the app's ``$TESSERA_HOME`` and
    outbound policy in ``env``; going back to ``replica`` after the task); returns the ``run`` call's ObjectRef."""
    worker = handle(task_id)
    if worker is None:
        worker = _worker(task_id, store_url, replica, env=env, num_cpus=num_cpus, max_tasks=max_tasks, warm=False)
    return worker.run.remote(task_id, max_result_rows)


def prestart(store_url: str, replica: Any, *, env: dict[str, str], num_cpus: float,
             max_tasks: int = MAX_TASKS_PER_WORKER) -> tuple[str, Any]:
    """Start a spare for a task that does not exist yet, watching ``replica`` (an actor handle): the id it waits
    for, and an ObjectRef that resolves when its imports are done."""
    task_id = new_task_id()
    worker = _worker(task_id, store_url, replica, env=env, num_cpus=num_cpus, max_tasks=max_tasks, warm=True)
    return task_id, worker.ready.remote()


def wait_for(worker: str) -> str:
    """A worker back from its task waits for a new task id: that id (the replica's next task takes it)."""
    task_id = new_task_id()
    assign(task_id, worker)
    return task_id


def finished(ref: Any) -> bool:
    """Whether an ObjectRef has resolved (with a value or an error), without waiting."""
    import ray

    return bool(ray.wait([ref], timeout=0)[0])


def current_replica() -> Any:
    """The handle of the actor this code runs in (a Serve replica), or None outside an actor: no spares there."""
    import ray

    if not ray.is_initialized() or ray.get_runtime_context().get_actor_id() is None:
        return None
    return ray.get_runtime_context().current_actor


def reconcile(store: TaskStore, task: dict[str, Any]) -> bool:
    """Fail an unfinished task whose worker is gone with the reason ``interrupted``; True if it did."""
    if task["status"] not in ("queued", "running") or alive(task["id"]):
        return False
    if task["status"] == "queued" and time.time() - task["created"] < LAUNCH_GRACE_S:
        return False  # its worker may be starting
    release(task["id"])  # a dead worker's record
    try:
        return interrupted(store, task["id"], INTERRUPTED)
    except Exception:  # noqa: BLE001  (the store refuses the write: the failure is kept, answered as not stored)
        if kept_failures.kept(task["id"]) is None:
            log.exception("task %s: its failure (interrupted) could not be written to the task store", task["id"])
            kept_failures.keep(task["id"], INTERRUPTED)
        return True


def interrupted(store: TaskStore, task_id: str, error: str) -> bool:
    """Fail an unfinished task whose worker stopped (the service never resumes one). An upload's ingestion also loses
    its uploaded file and staging folder and, when it was the first upload into its index (no documents committed),
    the index's folder and record, so the name and the disk are free again. True if the task was unfinished.

    A cancelled upload's worker has stopped too by now (every caller knows it), so its first index goes as well."""
    from serve.tasks.ingest_task import discard_stopped_upload, forget_unborn, in_this_home, remove_unborn

    row = store.task(task_id, None)
    row = None if row is None else in_this_home(row)  # a home moved since: its files here, none of the old place's
    if row is not None and row["status"] == "cancelled":
        discard_leftovers(row, store)
    if row is None or row["status"] not in ("queued", "running"):
        return False
    job, owner = row["spec"].get("ingest"), None
    if job:  # before the task is final, as run_ingest does: meanwhile no other upload into the index is accepted
        try:
            discard_stopped_upload(job)  # with the lock its killed run left in an index that stays
            owner = remove_unborn(store, task_id, job)
        except Exception:  # noqa: BLE001  (a job queued by another version may lack a field: the task still fails)
            log.exception("task %s: its upload's leftovers could not be removed", task_id)
        if error.startswith(INTERRUPTED):  # its worker stopped (not a failure of the task's own, said as it is)
            error += (f"; of its documents, those committed before it stopped stay in index '{job.get('index')}' and "
                      "the rest were not added: send them all again with replace: true (each then replaces its copy, "
                      "if any)" if owner is None else "; none of its documents were added (the index it was making is "
                      "gone)")
    done = store.finish(task_id, "failed", error=error)
    if owner is not None:
        forget_unborn(store, job, owner)
    return done


def discard_leftovers(task: dict[str, Any], store: TaskStore | None = None, wait_s: float | None = None) -> None:
    """What a task that ended before its worker finished (cancelled) leaves behind: an upload's file and staging
    folder; with ``store`` (only once its worker is known dead, else it may still be writing there), the index's
    ``running.lock`` its killed run left (waiting up to ``wait_s`` for the dying process to free it, by default
    ``WORKER_EXIT_S``: ``discard_stopped_upload``), and a first upload's empty index folder and record
    (``remove_cancelled``)."""
    if "ingest" in task["spec"]:
        from serve.tasks.ingest_task import (WORKER_EXIT_S, discard_stopped_upload, discard_upload, in_this_home,
                                             remove_cancelled)

        task = in_this_home(task)
        job = task["spec"]["ingest"]
        if store is None:
            discard_upload(job)  # its file at once; the worker, maybe alive, may write staged shards again
            return
        discard_stopped_upload(job, WORKER_EXIT_S if wait_s is None else wait_s)
        if remove_cancelled(store, task):
            log.info("task %s: its cancelled first upload's index '%s' is removed", task["id"],
                     task["spec"]["ingest"]["index"])


def recover(store: TaskStore) -> int:
    """At replica start: every unfinished task without a live worker reaches ``failed`` (interrupted), and a cancelled
    upload whose worker is gone loses its leftovers (the replica that watched it may have died first): the lock its
    killed run left and, for a first upload, its empty index. Its worker is long gone, so nothing waits for it."""
    for task in cancelled_uploads(store):
        if not alive(task["id"]):
            discard_leftovers(task, store, wait_s=0.0)
    return sum(reconcile(store, task) for task in store.unfinished())


def cancelled_uploads(store: TaskStore) -> list[dict[str, Any]]:
    """The cancelled uploads that are still the latest of their index."""
    latest = (store.task(row["ingest_task"], None) for row in store.indices_made().values() if row["ingest_task"])
    return [task for task in latest if task is not None and task["status"] == "cancelled"]
