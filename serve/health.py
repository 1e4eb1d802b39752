"""Whether each configured model can answer now, read from Serve's own status, never assumed.

The ingress answers as soon as its own replica is up, while a model deployment may
still be loading its weights. A model replica is RUNNING only once its constructor
has returned, and the constructor loads the model and runs one forward pass, so
"a RUNNING replica" is "loaded". ``GET /v1/models`` and ``GET /healthz`` read that from
``serve.status()``: it asks the controller and wakes nothing, where a call through a
deployment handle would start a replica of a deployment scaled to zero.

The flow routes need two more things, which ``/healthz`` checks too: the task store answers
(a ``SELECT 1``, waited for at most ``STORE_TIMEOUT_S``), and a SQLite store can be written (``store_unwritable``:
its disk's free space and the replica's file size limit, read without writing; a ``SELECT 1`` reads nothing from the
file, so on a full disk it answered and ``/healthz`` said ``ok`` while every task was refused), and
``$TESSERA_HOME`` is a writable folder (uploads, indices and saved flows are written there). ``/healthz`` is open
to every client (no key), so what it says of them names no path of this machine (``tasks.db``,
``$TESSERA_HOME/indices``); the server's log has the problem in full, once each time it changes.

Each check's blocking call runs on a few threads of its own (``_in_pool``), not on the event loop's default pool:
that pool runs the requests' flows (searches, chats waiting on their models), and six streamed chats on a 2-core
replica held all its threads, so ``/healthz`` waited for one of them to end (6 s), or said the task store did not
answer within its 2 s.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import re
import resource
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar

import sqlalchemy as sa

from serve.schemas import ModelCard
from serve.http.server_paths import without_server_paths
from flows.task_store_check import refused_words
from serve.tasks.taskstore import TaskStore, driver_error, shown_url

T = TypeVar("T")
logger = logging.getLogger(__name__)

#: The health checks' own threads: a store check at a time (``_checking``), Serve's status, the home folder's.
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="tessera-health")


async def _in_pool(call: Callable[..., T], *args: Any) -> T:
    """``call(*args)`` on the health checks' threads, awaited from the event loop."""
    return await asyncio.get_running_loop().run_in_executor(_POOL, functools.partial(call, *args))


_FAILED = {"UNHEALTHY", "DEPLOY_FAILED"}
_GONE = {"STOPPING", "STOPPED"}


def _name(value: Any) -> str:
    """An enum member of Serve's status (a str enum) or a plain string, as its value."""
    return str(getattr(value, "value", value))


def model_state(overview: Any | None) -> tuple[str, str | None]:
    """``(state, reason)`` of a deployed model from its deployment's status overview (None: not created yet).

    ``overview`` has Serve's ``DeploymentStatusOverview`` fields: ``status``, ``replica_states``
    (state -> count) and ``message``."""
    if overview is None:
        return "loading", "the deployment is not created yet"
    replicas = {_name(state): count for state, count in (overview.replica_states or {}).items() if count}
    if replicas.get("RUNNING"):
        return "ready", None
    message = public_reason(overview.message)
    if _name(overview.status) in _FAILED:
        return "unhealthy", message
    if not set(replicas) - _GONE and _name(overview.status) == "HEALTHY":
        return "idle", "scaled to zero replicas: the next request starts one, which loads the model"
    if slow := _SLOW_START.search(message or ""):  # Serve's warning of a slow __init__: a model loading, as expected
        return "loading", f"its replica has been loading the model for more than {slow.group(1)}"
    return "loading", message


#: Serve's message for a replica whose constructor runs long ("... has 1 replicas that have taken more than 30s to
#: initialize. This may be caused by a slow __init__ or reconfigure method."): developer's words for a model loading.
_SLOW_START = re.compile(r"taken more than (\d+s) to initialize")


def live_cards(cards: list[ModelCard], deployments: Mapping[str, Any]) -> list[ModelCard]:
    """``cards`` with each deployed model's current state (a missing model stays missing)."""
    live = []
    for card in cards:
        if card.status == "missing":
            live.append(card)
            continue
        state, reason = model_state(deployments.get(card.deployment))
        live.append(card.model_copy(update={"status": state, "reason": reason}))
    return live


def readiness(cards: list[ModelCard]) -> str | None:
    """Why the app is not ready (None when every configured model that is not missing has loaded)."""
    waiting = [f"model '{c.id}' is {c.status}" + (f" ({c.reason})" if c.reason else "")
               for c in cards if c.status not in ("ready", "missing")]
    return "; ".join(waiting) or None


#: A terminal colour code (Ray colours the ``ray::`` line of a task's error).
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def public_reason(message: str | None) -> str | None:
    """Serve's message as clients get it (``/healthz`` answers without a key): its own sentences, then the replica's
    exception from the traceback's last line, worded without server paths. Serve appends the whole traceback of a
    constructor that raised (the server's files, the replica's pid, ip and actor id); the replica's log keeps it."""
    if not message:
        return None
    text = _ANSI.sub("", message)
    head, found, trace = text.partition("Error:\n")
    if found:
        lines = [line.strip() for line in trace.splitlines() if line.strip()]
        text = f"{head.strip()} Error: {lines[-1] if lines else ''}".strip()
    return without_server_paths(text)[:600]


async def deployment_statuses(app_name: str) -> Mapping[str, Any]:
    """Serve's status overview of each deployment of ``app_name`` (a blocking controller call, off the loop)."""
    from ray import serve

    status = await _in_pool(serve.status)
    app = status.applications.get(app_name)
    return app.deployments if app is not None else {}


#: How long requests reuse Serve's word on which deployments it gave up on (one controller call per this).
FAILED_CHECK_S = 2.0
_failed: dict[str, tuple[float, frozenset[str]]] = {}


async def failed_deployments(app_name: str) -> frozenset[str]:
    """The deployments of ``app_name`` that Serve gave up on (``DEPLOY_FAILED``: their replicas failed to start, and
    none is tried again until the next deploy), read at most every ``FAILED_CHECK_S``. A request to one waited for a
    replica that never comes (more than 90 s, and on)."""
    import time

    now = time.monotonic()
    checked, failed = _failed.get(app_name, (-FAILED_CHECK_S, frozenset()))
    if now - checked >= FAILED_CHECK_S:
        deployments = await deployment_statuses(app_name)
        failed = frozenset(name for name, overview in deployments.items()
                           if _name(overview.status) == "DEPLOY_FAILED")
        _failed[app_name] = (now, failed)
    return failed


#: The problems last logged: a probe polls /healthz every few seconds, and the log says each problem when it starts.
_logged: list[str] = []
#: How long /healthz waits for the task store to answer ``SELECT 1``.
STORE_TIMEOUT_S = 2.0
#: A check of each store still running (keyed by URL): a store that hangs gets one check at a time, not one per poll.
_checking: dict[str, asyncio.Future] = {}
#: Per SQLite store, an engine without a pool: a pooled connection keeps reading a file deleted under it.
_fresh: dict[str, sa.Engine] = {}


def store_problem(store: TaskStore) -> str | None:
    """Why the task store cannot serve now (None: ``SELECT 1`` answered); blocking."""
    url = sa.engine.make_url(store.url)
    engine = store.engine
    try:
        if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
            path = Path(url.database)
            if not path.is_file():
                return f"task_store: the SQLite file {path} is gone"
            if not os.access(path, os.R_OK | os.W_OK):
                return f"task_store: the SQLite file {path} is not readable and writable"
            if refused := store_unwritable(path):
                return f"task_store: {shown_url(store.url)} cannot be written: {refused}"
            engine = _fresh.get(store.url) or _fresh.setdefault(store.url, sa.create_engine(
                store.url, poolclass=sa.pool.NullPool, connect_args={"timeout": STORE_TIMEOUT_S}))
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except Exception as err:  # noqa: BLE001  (any driver's error: the store is not usable, and why)
        refused = refused_words(err)  # a full disk: say so, not a bare "disk I/O error"
        return f"task_store: {shown_url(store.url)} does not answer" + (f": {refused}" if refused else
                                                                        f" ({driver_error(err, 300)})")
    return None


#: Less free space than this on a SQLite store's disk (or under its file size limit) is a full disk: a task's result
#: alone is often hundreds of KB, and a write SQLite cannot make is a 507 or a task failed.
STORE_MIN_FREE_BYTES = 1 << 20


def store_unwritable(path: Path) -> str | None:
    """Why the SQLite file ``path`` cannot take writes now, seen without writing (a probe's write would land in the
    WAL's space already there, and prove nothing): its disk's free space or inodes, or this process's file size limit
    (``ulimit -f``); None when neither stops it. A quota is not seen: its refusals are said by the writes."""
    disk = os.statvfs(path.parent)
    free = disk.f_bavail * disk.f_frsize
    if free < STORE_MIN_FREE_BYTES:
        return (f"its disk is full ({free // 1024} KiB free, under {STORE_MIN_FREE_BYTES // 1024} KiB): tasks, chats "
                "and uploads are refused (507) until space is freed there")
    if disk.f_files and not disk.f_favail:  # SQLite makes its -wal and -shm files anew after the last connection
        return "its disk has no free inodes: free some there"
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY:
        largest = max((p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists()), default=0)
        if largest + STORE_MIN_FREE_BYTES > limit:
            return (f"the service's file size limit (ulimit -f: {limit // 1024} KiB) leaves it no room to grow "
                    f"({largest // 1024} KiB now): raise the limit where the service starts")
    return None


async def store_readiness(store: TaskStore) -> str | None:
    """``store_problem`` off the loop, waited for at most ``STORE_TIMEOUT_S``."""
    pending = _checking.get(store.url)
    if pending is None or pending.done() or pending.get_loop() is not asyncio.get_running_loop():
        pending = _checking[store.url] = asyncio.ensure_future(_in_pool(store_problem, store))
    try:
        return await asyncio.wait_for(asyncio.shield(pending), STORE_TIMEOUT_S)
    except asyncio.TimeoutError:
        return f"task_store: {shown_url(store.url)} did not answer SELECT 1 within {STORE_TIMEOUT_S:g} s"


def home_problem(home: str | Path, *folders: Path) -> str | None:
    """Why ``$TESSERA_HOME`` or one of its ``folders`` is not a folder this service can write in. One that does not
    exist yet is made when first needed: then its nearest existing parent must be a writable folder."""
    for folder in (Path(home), *folders):
        there = next(path for path in (folder, *folder.parents) if path.exists())
        if not there.is_dir():
            return f"tessera_home: {there} is not a folder"
        if not os.access(there, os.W_OK | os.X_OK):
            return f"tessera_home: {there} is not writable"
    return None


async def service_readiness(service: Any) -> list[str]:
    """Why the flow service (``serve.service.Service``) cannot serve: its task store, its ``$TESSERA_HOME``."""
    problems = [await store_readiness(service.store),
                await _in_pool(home_problem, service.home, service.indices.folder)]
    problems = [problem for problem in problems if problem]
    if problems != _logged:
        _logged[:] = problems
        for problem in problems:
            logger.warning("not ready: %s", problem)
    return [without_server_paths(problem) for problem in problems]

