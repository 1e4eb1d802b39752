"""One ``tessera serve`` per SQLite task store, held for as long as the command runs.

A task's worker is looked up in the Ray cluster of the service that asks (``serve.tasks.task_registry``), so a second
service on the same store (a new ``tessera serve`` with the same ``$TESSERA_HOME``, started before the old one
stopped) took the first one's running tasks for interrupted ones: it failed them, deleted their uploads, and let a
second ingestion into their index start. So ``tessera serve`` takes an exclusive ``flock`` on ``<store>.serve.lock``
beside each SQLite store before Serve starts, and refuses to start where another holds it. The kernel drops the
lock when the process ends, however it ends (a SIGKILL included), so a lock is never left stale. A PostgreSQL
store shared by several clusters is the operator's to keep to one (docs/serving.md).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO, Any

from flows.commands._support import CliError


def sqlite_stores(config: dict[str, Any]) -> list[Path]:
    """The SQLite files of the config's task stores (``args.service.task_store``, else ``tasks.db`` in the
    application's ``TESSERA_HOME``: its ``runtime_env``'s, else this process's)."""
    from flows.sqlite_urls import sqlite_file
    from flows.task_store_url import app_home, default_task_store_url

    urls = [str((application.get("args") or {})["service"].get("task_store")
                or default_task_store_url(app_home(application)))
            for application in config.get("applications") or []
            if (application.get("args") or {}).get("service") is not None]
    return list(dict.fromkeys(Path(file) for url in urls if (file := sqlite_file(url)) is not None))


def hold_task_stores(config: dict[str, Any]) -> list[IO[str]]:
    """Lock each SQLite task store of ``config`` for this process (keep what it returns open while the service
    runs), or refuse, naming the process that holds one."""
    held = []
    for store in sqlite_stores(config):
        lock = open(f"{store}.serve.lock", "a+", encoding="utf-8")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            holder = lock.read().strip() or "?"
            lock.close()
            raise CliError(f"the task store {store} is in use by another tessera serve (pid {holder}): a second "
                           "service on it would take that one's running tasks for interrupted ones and fail them; "
                           "stop it first (SIGTERM), or give this one another TESSERA_HOME or "
                           "args.service.task_store", field="args.service.task_store") from None
        lock.seek(0)
        lock.truncate()
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        held.append(lock)
    return held
