"""A SQLite file as a SQLAlchemy URL (``sqlite:///PATH``) and back, whatever its folders' names.

Why: SQLAlchemy ends the file's path at a ``?`` (the URL's query) and decodes ``%XX``, and URL parsers of other
libraries (``urllib.parse``, which MLflow uses) end it at a ``#`` (a fragment): ``sqlite:///`` + a path under
``/srv/what?`` opened ``/srv/what``, one under ``/srv/100%25`` opened ``/srv/100%``, and ``tessera bench`` wrote its
MLflow store beside a ``--out`` under ``/data/run #1``. The task store (``flows.task_store_url``) and the
benchmark's MLflow store (``flows.bench.tracking``) write and read their URLs here.
"""

from __future__ import annotations

from pathlib import Path


def sqlite_url(path: str | Path) -> str:
    """``sqlite:///`` + ``path`` with ``%``, ``?`` and ``#`` quoted, the rest (spaces, letters such as ``ë``) as
    written, so the URL reads as the path."""
    return "sqlite:///" + str(path).replace("%", "%25").replace("?", "%3F").replace("#", "%23")


def sqlite_file(url: str) -> str | None:
    """The SQLite file a SQLAlchemy URL names (relative as given), as SQLAlchemy reads it; None for another database,
    an in-memory one, a ``file:`` URI or no URL."""
    import sqlalchemy as sa

    try:
        parsed = sa.engine.make_url(url)
    except Exception:  # noqa: BLE001 - no URL: the caller's own check says so
        return None
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:" or database.startswith("file:"):
        return None
    return database


def with_query(url: str, path: str | Path) -> str:
    """``sqlite_url(path)`` with ``url``'s query (``?timeout=5``): the file's own ``?`` is quoted in ``url``, so
    its first ``?`` starts the query."""
    query = url.partition("?")[2]
    return sqlite_url(path) + (f"?{query}" if query else "")
