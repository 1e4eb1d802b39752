"""The flow half of the ingress: request bodies to validated flows, tasks to Ray, flows by tenant.

Everything a body says is checked before anything runs: a mosaicRAG request or Tessera's native body, the flow
(inline, built-in, or the tenant's saved flow: a name is never read as a file path), the queries, the index, every
step's operator and params. A bad body is a ``SpecError`` (a 422 naming the step and field) or an ``ApiError``
naming the limit.

Steps whose model this app serves (same operator, same model params; for a language-model
step, an alias naming the model a language-model deployment runs) are placed on that
deployment, so a flow run by the API shares the served models instead of loading its own
copy, and its answers scale with the language model's replicas (vLLM on GPU nodes).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from pydantic import ValidationError

from flows.param_settings import with_settings
from flows.spec import FlowSpec, from_mosaic, is_mosaic_request
from operators.errors import SpecError, one_line
from operators.json_tree import json_kind
from operators.unicode import blank, first_broken_text
from serve.security import auth
from serve.tasks import kept_failures, taskrunner, unstored
from serve.runs import warm
from serve.http import threads
from serve.http.errors import ApiError, too_many_tasks
from serve.runs.served_models import placed
from serve.runs.flow_request import (Asked, FlowRequest, SearchRequest, check_models_here, named_as_sent,
                                refuse_filters_outside_index, refuse_missing_columns, refuse_missing_files,
                                refuse_reading_documents, validation_error)
from serve.runs.flow_resolution import FlowResolution
from serve.indices.index_owner import adding_refused, restore_rows
from serve.indices.index_roots import default_data_roots, default_roots
from serve.indices.indices import Indices
from serve.tasks.retention import Pruner, delete_task
from serve.security.revocations import Revocations
from serve.service_settings import Limits, setting
from serve.tasks.spare import SpareWorkers
from serve.runs.placed_status import refuse_failed_placements
from serve.security.spec_guard import check_flow
from serve.runs.step_bounds import check_bounds, check_step_count
from serve.tasks.taskstore import TaskStore, TasksAtLimit

log = logging.getLogger("tessera.serve")

_current: "Service | None" = None


def configured() -> bool:
    """Whether this app serves flows (``args.service`` is set)."""
    return _current is not None


def current() -> "Service":
    if _current is None:
        raise ApiError(503, "the flow service is not configured in this app (its `service` is null: it serves the "
                       "models only)", kind="server_error", code="service_not_configured")
    return _current


@dataclass
class Prepared:
    spec: FlowSpec
    flow: Any  # the built flows.spec.Flow
    queries: list[dict[str, str]]
    steps: list[str]


class Service(FlowResolution):
    """Task store, limits, default index and served models of one ingress replica; its flows by name and the spec
    a request runs are ``FlowResolution``'s (serve/runs/flow_resolution.py)."""

    def __init__(self, config: dict[str, Any], served: list[dict[str, Any]], app_name: str,
                 model_names: Iterable[str] = ()):
        global _current
        import os

        from operators.redact import install_log_redaction
        from serve.security.private_files import keep_private

        keep_private()  # every file this replica writes (uploads, owner files, saved flows) is its user's only
        install_log_redaction()  # secrets and bearer tokens are masked in every log record of this replica
        os.environ["TESSERA_HOME"] = self.home = config["home"]  # this replica's process serves this app only
        # Specs come from the network: outbound URLs of steps reach public addresses only unless the operator of
        # the service chose otherwise (operators/outbound.py's policy; TESSERA_ALLOW_HOSTS names exceptions).
        self.task_env = {"TESSERA_HOME": self.home, "TESSERA_OUTBOUND": os.environ.setdefault("TESSERA_OUTBOUND",
                                                                                              "server")}
        if os.environ.get("TESSERA_ALLOW_HOSTS"):
            self.task_env["TESSERA_ALLOW_HOSTS"] = os.environ["TESSERA_ALLOW_HOSTS"]
        self.store = TaskStore(config["task_store"])
        self.revocations = Revocations(self.store.engine)  # the keys revoked since the app was built
        self.limits = Limits.model_validate(config["limits"])
        self.default_index = config["default_index"]
        self.index_roots = config.get("index_roots") or default_roots(self.default_index, Path(self.home))
        self.data_roots = default_data_roots() if config.get("data_roots") is None else config["data_roots"]
        self.num_cpus = float(config["task_num_cpus"])
        self.spares = SpareWorkers(self.store.url, env=self.task_env, num_cpus=self.num_cpus,
                                  count=config["spare_task_workers"],
                                  keep_at_most=setting(config, "max_idle_task_workers"),
                                  idle_s=setting(config, "idle_task_worker_retire_s"))
        self.served, self.app_name = served, app_name
        self.model_names = frozenset(model_names)  # the ids and aliases clients send as `model` (GET /v1/models)
        self.admins = frozenset(config.get("admins") or ())  # key ids with api_keys' admin: true
        self.compact_after_shards = int(setting(config, "compact_after_shards"))  # an upload over it compacts
        self.answers = threads.Answers(setting(config, "answer_threads"), setting(config, "answer_queue"))
        self.indices = Indices(self)
        if adding_refused(self.indices.folder, self.index_roots) is not None:
            log.warning("tessera serve: %s, where uploads make indices, is outside the index roots %s "
                        "(args.service.index_roots): every upload and change of an index is refused (403)",
                        self.indices.folder, ", ".join(self.index_roots))
        restore_rows(self.store, self.indices.folder)  # a new or reset task store: rows back from the owner files
        self._watchers: set[asyncio.Task] = set()
        unstored.store_all(self.store)  # failures kept while the store refused them: theirs, not "interrupted"
        recovered = taskrunner.recover(self.store)
        if recovered:
            log.warning("tessera serve: %d unfinished task(s) had no worker left; failed as interrupted", recovered)
        self.spares.refill()
        # now, then hourly; a config without the key keeps every task (not the model's 30: it deletes nothing unasked)
        self.pruner = Pruner(self.store, config.get("task_retention_days")).start()
        self.warming = warm.start(self)  # the first request's imports and loads, on a daemon thread
        auth.use_revocations(self.revocations)
        _current = self

    def close(self) -> None:
        """Stop the pruner and the answers' threads, and close the task store's connections: at the replica's
        shutdown (``ModelAPI.__del__``), and at the end of a test that made this service (each service held a pool of
        database connections, and a test run's worker ran out of descriptors that ``select`` can watch)."""
        global _current
        self.pruner.stop()
        self.answers.pool.shutdown(wait=False, cancel_futures=True)
        self.store.engine.dispose()
        if auth.revocations() is self.revocations:
            auth.use_revocations(None)
        if _current is self:
            _current = None

    # -- flows ----------------------------------------------------------------------------

    def prepare(self, body: Any, tenant: str, *, search: bool = False) -> Prepared:
        """A body (mosaicRAG or native) as a built flow and its queries; nothing has run. Each step raises the first
        problem it finds as a 4xx, so a body with several is refused for the first in this order."""
        asked = self.read_body(body, tenant, search=search)
        self.check_limits(asked)
        spec = self.runnable_spec(asked, tenant)
        flow = self.checked_flow(spec, asked.texts, asked.query_field)
        refuse_missing_files(flow)
        refuse_failed_placements(flow)  # a 503 at once, not after the step's 60 s wait
        return Prepared(spec, flow, [{"qid": str(i + 1), "query": t} for i, t in enumerate(asked.texts)],
                        flow.needed_steps())

    def read_body(self, body: Any, tenant: str, *, search: bool) -> Asked:
        """What a body asks for (the flow's spec, the queries, the index, the cut), read and checked on its own."""
        if not isinstance(body, dict):
            raise SpecError(f"the body must be a JSON object, not {json_kind(body)}", field="body")
        broken = first_broken_text(body)
        if broken is not None:  # a lone surrogate: no index name, step id or YAML file can hold it
            raise SpecError(broken[1], field=broken[0] or "body")
        if not search and is_mosaic_request(body):
            spec, query = from_mosaic(body)
            check_step_count(spec, self.limits)
            return Asked(spec, [] if query is None else [query])
        try:
            request = (SearchRequest if search else FlowRequest).model_validate(body)
        except ValidationError as err:
            raise validation_error(err) from None
        if request.query is not None and request.queries is not None:
            raise SpecError("give query or queries, not both", field="queries")
        spec, built = self.resolve_flow(request.flow, tenant, search=search), None
        if request.params:  # before every check below: a setting is checked as the spec's own params are
            spec = with_settings(spec, request.params)
        check_step_count(spec, self.limits)  # before a build: a flow's every step is built and checked
        if search:  # built here to refuse a flow that reads documents; the top_k cut reads the same build
            built = spec.build()
            refuse_reading_documents(built)
        texts = request.queries if request.queries is not None else [] if request.query is None else [request.query]
        field = "query" if request.queries is None else "queries"  # what a refusal of no query names
        return Asked(spec, texts, request.index, request.top_k, built, field)

    def check_limits(self, asked: Asked) -> None:
        """Every query has text (searched for nothing, it would bring arbitrary documents) of at most
        ``max_query_chars``, and the number of queries and ``top_k`` are within this service's limits."""
        texts, longest = asked.texts, self.limits.max_query_chars
        for position, text in enumerate(texts):
            which, param = ("the query", "query") if len(texts) == 1 else (f"query {position + 1}", "queries")
            if not isinstance(text, str) or blank(text):
                raise ApiError(422, f"{which} is empty", param=param, code="empty_query")
            if len(text) > longest:
                raise ApiError(422, f"{which} has {len(text)} characters, over the limit max_query_chars={longest}",
                               param=param, code="max_query_chars")
        limit = self.limits.max_queries_per_request
        if len(texts) > limit:
            raise ApiError(422, f"{len(texts)} queries, over the limit max_queries_per_request={limit}",
                           param="queries", code="max_queries_per_request")
        if asked.top_k is not None and asked.top_k > self.limits.max_result_rows:
            raise ApiError(422, f"top_k={asked.top_k} is over the limit max_result_rows={self.limits.max_result_rows}",
                           param="top_k", code="max_result_rows")

    def checked_flow(self, spec: FlowSpec, texts: list[str], query_field: str = "query") -> Any:
        """``spec`` built (the ``Flow`` that runs) and checked as a flow this service may run for these queries;
        ``query_field``: the body's field that gave them (``queries: []`` is refused naming ``queries``)."""
        built = spec.build()
        for unset in built.unset_params():
            raise unset
        check_flow(built)  # no server secret, unaliased language model or model path
        check_bounds(built, self.limits)  # no step asking for more than the service gives
        if not texts and any(not built.inputs[step] and built.operators[step].scope != "source"
                             for step in built.needed_steps()):
            said = "queries is empty: give at least one" if query_field == "queries" else "give query or queries"
            raise ApiError(422, f"flow '{built.name}' searches for queries: {said}", param=query_field,
                           code="no_query")
        check_models_here(built)
        return built

    def check_to_save(self, spec: FlowSpec) -> None:
        """What a run refuses of a spec alone, asked when it is saved (``PUT /flows/{name}``), so its author learns
        then and not at its first run: the spec guard's rules, the limits' bounds (serve/runs/step_bounds.py) and a
        model of another kind than its step loads, a step whose input columns no step above it writes from a search's
        queries and its index (``generate.answer`` with no ``generate.context``: ``refuse_missing_columns``, as a
        task's; the default index for a step that names none), the same 422s. What depends on the machine or the
        request is left to the run (``GET /flows`` says why a saved flow does not run): a model not made yet, an unset
        variable, an unset param, an index (missing: it may come later) or a file outside the roots, another key's
        index."""
        from serve.runs.flow_request import check_model_kinds

        check_step_count(spec, self.limits)
        built = placed(spec, self.served, self.app_name, check=False).build()  # a served model checked where served
        check_flow(built)
        check_bounds(built, self.limits)
        check_model_kinds(built)
        # the columns a search of it reads: its queries' qid and query, and the fields of the index it searches when
        # it names none (the default one); an index it names that is not made yet may bring any (it may come later)
        default = self.default_index if self.default_index and not self.default_index_missing() else None
        refuse_missing_columns((spec.with_index(default) if default and spec.unset_index_steps() else spec).build(), [])

    # -- tasks ----------------------------------------------------------------------------

    async def enqueue(self, body: Any, tenant: str) -> str:
        with named_as_sent(body):
            prepared = await asyncio.to_thread(self.prepare, body, tenant)
            refuse_missing_columns(prepared.flow, prepared.queries)  # a 422 now, as /v1/search's, not a failed task
            await asyncio.to_thread(refuse_filters_outside_index, prepared.flow)  # (reads the indices' manifests)
        await asyncio.to_thread(unstored.store_all, self.store)  # the failures kept: counted as unfinished till then
        try:
            with self.spares.lend() as lent:
                task_id = await asyncio.to_thread(
                    self.store.create_task, tenant, prepared.spec.name, prepared.spec.to_dict(), prepared.queries,
                    prepared.steps, limit=self.limits.max_tasks_per_key, total=self.limits.max_tasks,
                    task_id=lent.task_id)
                lent.made = True
        except TasksAtLimit as refused:  # counted and refused in the insert itself: concurrent enqueues cannot pass
            raise too_many_tasks(self.limits, refused.why) from None
        await self.launch(task_id)
        return task_id

    async def launch(self, task_id: str) -> None:
        """Run a queued task on its Ray worker (the spare when the task took its id), and watch it: a task it leaves
        unfinished fails with the reason. The pool of spares is refilled a little later, unless the task's worker
        (reused) is back by then."""
        ref = await asyncio.to_thread(taskrunner.launch, task_id, self.store.url, env=self.task_env,
                                      num_cpus=self.num_cpus, max_result_rows=self.limits.max_result_rows,
                                      replica=self.spares.replica)
        self.spares.refill_later()
        watcher = asyncio.get_running_loop().create_task(self._watch(task_id, ref))
        self._watchers.add(watcher)
        watcher.add_done_callback(self._watchers.discard)

    async def _watch(self, task_id: str, ref: Any) -> None:
        """When the task's run ends, a task still unfinished failed with the reason; a worker that may run another
        task (its name came back) is a spare again."""
        reason = worker = None
        try:
            worker = await ref
        except Exception as err:  # noqa: BLE001  (the worker died, was killed, or exited)
            reason = f"{type(err).__name__}"
        try:  # first the failures kept while the store refused them: its worker's own reason, not "interrupted"
            await asyncio.to_thread(unstored.store_all, self.store)
            if await asyncio.to_thread(taskrunner.interrupted, self.store, task_id,
                                       f"{taskrunner.INTERRUPTED}{': ' + reason if reason else ''}"):
                log.warning("tessera serve: task %s ended without a final state (%s)", task_id, reason)
        except Exception as err:  # noqa: BLE001  (the store refuses the write: kept, unless its worker kept its own)
            log.warning("tessera serve: task %s: its end could not be written to the task store (%s)", task_id,
                        one_line(f"{type(err).__name__}: {err}", 300))
            error = f"{taskrunner.INTERRUPTED}{': ' + reason if reason else ''}"
            if await asyncio.to_thread(kept_failures.kept, task_id) is None:
                await asyncio.to_thread(kept_failures.keep, task_id, error)
        if worker is not None:
            await asyncio.to_thread(self.spares.returned, worker)

    def watched_tasks(self) -> int:
        """How many tasks this replica launched whose run it still watches (``_watch`` has not yet seen it end and
        failed an unfinished one): 0 once every task it started is settled. Safe from any thread."""
        return len(self._watchers)

    def task(self, task_id: str, tenant: str) -> dict[str, Any]:
        """The tenant's task, reconciled with Ray (an unfinished task without a worker is interrupted); 404 else."""
        task = self.store.task(task_id, tenant)
        if task is not None and task["status"] in ("queued", "running"):
            error = kept_failures.kept(task_id)  # its failure, which the store refused: stored now if it takes it
            if error is not None and not unstored.store_kept(self.store, task_id):
                return kept_failures.as_answered(task, error)
            if error is not None or taskrunner.reconcile(self.store, task):
                task = self.store.task(task_id, tenant)  # failed now (and maybe deleted since)
                if task is not None and task["status"] in ("queued", "running") and (
                        error := kept_failures.kept(task_id)) is not None:  # failed as interrupted, the store refusing
                    return kept_failures.as_answered(task, error)
        if task is None:
            raise _no_task()
        return task

    def cancel(self, task_id: str, tenant: str) -> None:
        """Cancel the tenant's unfinished task; a cancelled one again is a success, a finished or failed one a 409.
        A cancelled first upload's empty index goes once its worker is gone: here when ``stop`` saw it die, else when
        ``_watch`` sees it end."""
        task = self.task(task_id, tenant)
        if self.store.finish(task_id, "cancelled", log="cancelled by the client"):
            stopped = taskrunner.stop(task_id)
            taskrunner.discard_leftovers(task, self.store if stopped else None)
            return
        ended = self.store.task(task_id, tenant)  # it ended meanwhile: finished, failed, or cancelled by another call
        if ended is None:  # and was deleted since (DELETE /task/{id} of the ended task)
            raise _no_task()
        status = ended["status"]
        if status != "cancelled":
            raise ApiError(409, f"task {task_id} has already {status}: there is nothing to cancel", param="id",
                           code="task_ended")

    def delete(self, task_id: str, tenant: str) -> None:
        """Delete the tenant's ended task and its chats; 404 for no such task of the tenant, 409 while it is queued
        or running (cancel it first) or while an index names it as its latest ingestion."""
        why = delete_task(self.store, task_id, tenant)
        if why == "missing":
            raise _no_task()
        if why == "unfinished":
            raise ApiError(409, f"task {task_id} is still running: cancel it first (GET /task/cancel/{task_id})",
                           param="id", code="task_unfinished")
        if why.startswith("index:"):
            name = why.split(":", 1)[1]
            raise ApiError(409, f"task {task_id} is the latest ingestion of index '{name}', which reads it: it goes "
                           f"with the index (DELETE /v1/indices/{name})", param="id", code="task_of_index")


def _no_task() -> ApiError:
    return ApiError(404, "Task id not found", param="id", code="task_not_found")
