"""The task store's default URL: SQLite (WAL) at ``$TESSERA_HOME/tasks.db``.

Why a module of its own: two places must agree on it, the service's settings (``serve.service_settings``)
and ``tessera serve``'s start check (``flows.commands.serve``), which opens the store before Serve starts
and deliberately does not import the ``serve`` package (FastAPI, Ray Serve). Both import this instead.
"""

from __future__ import annotations

from operators.home import tessera_home


def default_task_store_url() -> str:
    """The SQLAlchemy URL of ``$TESSERA_HOME/tasks.db`` (absolute; ``TESSERA_HOME`` is read now, not at import)."""
    return f"sqlite:///{(tessera_home() / 'tasks.db').resolve()}"
