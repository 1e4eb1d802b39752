"""The task store's default URL: SQLite (WAL) at ``$TESSERA_HOME/tasks.db``.

Why a module of its own: two places must agree on it, the service's settings (``serve.service_settings``)
and ``tessera serve``'s start check (``flows.commands.serve``), which opens the store before Serve starts
and deliberately does not import the ``serve`` package (FastAPI, Ray Serve). Both import this instead.
"""

from __future__ import annotations

from pathlib import Path

from flows.sqlite_urls import sqlite_file, sqlite_url, with_query
from operators.home import tessera_home


def default_task_store_url(home: str | Path | None = None) -> str:
    """The SQLAlchemy URL of ``$TESSERA_HOME/tasks.db`` (absolute; ``TESSERA_HOME`` is read now, not at import), or
    of ``home``'s: an application's own ``TESSERA_HOME`` (its ``runtime_env``), which the service will use."""
    folder = Path(home).expanduser() if home else tessera_home()
    return sqlite_url((folder / "tasks.db").resolve())


def app_home(application: dict) -> str | None:
    """The ``TESSERA_HOME`` a Serve config's application sets in its ``runtime_env.env_vars`` (the service's home,
    where its default task store is), None where it sets none."""
    env = ((application.get("runtime_env") or {}).get("env_vars") or {}) if isinstance(application, dict) else {}
    return str(env["TESSERA_HOME"]) if isinstance(env, dict) and env.get("TESSERA_HOME") else None


def absolute_task_store_url(url: str) -> str:
    """``url`` with a SQLite file's path made absolute here (``~`` expanded, a relative one against the working
    directory), where the config is read: the start check expanded ``sqlite:///~/tasks.db`` to the home folder while
    the service opened ``./~/tasks.db`` under its Ray worker's working directory, and a relative path was opened
    there too, not where ``tessera serve`` ran. Other URLs are returned as they are."""
    database = sqlite_file(url)
    if database is None:
        return url
    absolute = str(Path(database).expanduser().resolve())
    return url if absolute == database else with_query(url, absolute)
