"""What the task store's two openers share: the connect timeout, how a URL and a driver's error are shown, and
the check that opens a store once.

Why in ``flows``: ``tessera serve``'s start check (``flows.commands.serve``) must not import the ``serve`` package
(FastAPI, Ray Serve), and the service's store (``serve.tasks.taskstore``) must connect exactly as that check did, so the
service imports this, not the other way round.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from operators.disk_refusal import refusal, refused_by
from operators.errors import one_line

#: Seconds a PostgreSQL connection may take to open (libpq's ``connect_timeout``): a host that drops packets, rather
#: than refusing, would otherwise hang the app's build, the start check and every request for minutes (the kernel's
#: TCP retries). A URL that sets ``?connect_timeout=N`` keeps its own.
CONNECT_TIMEOUT_S = 5


def connect_args(url: sa.URL) -> dict[str, Any]:
    """The driver arguments of a connection to ``url`` beyond the URL's: PostgreSQL's connect timeout."""
    if url.get_backend_name() == "postgresql" and "connect_timeout" not in url.query:
        return {"connect_timeout": CONNECT_TIMEOUT_S}
    return {}


def shown_url(url: str) -> str:
    """``url`` with its password masked (as is, when it is no URL SQLAlchemy reads); a SQLite file's path as written
    (SQLAlchemy's own rendering shows ``/home/Zoë`` as ``/home/Zo%C3%AB``)."""
    from flows.sqlite_urls import sqlite_file, with_query

    if (file := sqlite_file(url)) is not None:
        return with_query(url, file)
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except sa.exc.ArgumentError:
        return url


def driver_error(err: BaseException, limit: int | None = None) -> str:
    """A database error as one line, ``Type: message``, of the driver's own error when SQLAlchemy wrapped it."""
    cause = getattr(err, "orig", None) or err
    return one_line(f"{type(cause).__name__}: {cause}", limit)


def refused_words(err: BaseException) -> str | None:
    """Where the store's disk refused a write (full, over quota, a file size limit: ``refused_by``), what to say
    instead of the driver's bare ``disk I/O error`` (which read as a broken store or URL): that the disk refused it,
    and what to do; else None."""
    if not refused_by(err):
        return None
    said = refusal(err) or "the disk is full, or at a quota or file size limit"
    return f"its disk refused a write ({said}; {driver_error(err, 200)}): free space there"


def task_store_problem(url: str, *, default: bool = False) -> str | None:
    """Why the task store at ``url`` cannot be opened, in one line (None: it opens). A SQLite file is opened (its
    folder made) without making tables; another database is connected to within ``CONNECT_TIMEOUT_S`` and asked
    ``SELECT 1``. ``default``: the URL is the default store under ``$TESSERA_HOME``, and the line says so."""
    if problem := url_problem(url):
        return problem
    parsed = sa.engine.make_url(url)
    note = " (the default, under TESSERA_HOME)" if default else ""
    if parsed.get_backend_name() != "sqlite":
        return _server_problem(parsed, note)
    path = Path(parsed.database).expanduser()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(path)) as db:
            db.execute("PRAGMA schema_version")  # fails on a file that is no database
    except (OSError, sqlite3.Error) as err:
        if refused := refused_words(err):  # SQLite could not make its -shm (or journal) file: the disk, not the store
            return f"the task store {path}{note} cannot be opened: {refused}, then run the command again"
        blocking = next((p for p in reversed(path.parents) if p.exists() and not p.is_dir()), None)
        problem = f"{blocking} is a file, not a folder" if blocking else getattr(err, "strerror", None) or err
        return f"the task store {path}{note} cannot be opened: {problem}"
    return None


def url_problem(url: str) -> str | None:
    """What is wrong with the task store's URL itself, found without opening it (the service's settings refuse it
    too: ``serve.service_settings``): no URL, a database SQLAlchemy has no dialect for, a SQLite store in memory."""
    try:
        parsed = sa.engine.make_url(url)
    except Exception:  # noqa: BLE001 - SQLAlchemy's ArgumentError, or a value it cannot split
        return f"args.service.task_store {url!r} is not a database URL"
    if parsed.get_backend_name() != "sqlite":
        return _dialect_problem(parsed)
    fix = "write sqlite:////absolute/path/tasks.db (four slashes) or leave it out for $TESSERA_HOME/tasks.db"
    if parsed.host:  # `sqlite://tasks.db` (two slashes): no file, an in-memory store
        return f"the task store {url!r} names a host, {parsed.host!r}, which SQLite has none of; {fix}"
    if parsed.database in (None, "", ":memory:") or parsed.database.startswith("file::memory:"):
        # each process's own: the tasks were lost at each restart, and the task workers' writes never seen
        return f"the task store {url!r} is an in-memory SQLite store, each process's own and lost at each restart; " \
               f"{fix}"
    return None


def _dialect_problem(url: sa.URL) -> str | None:
    """A database SQLAlchemy has no dialect for (``postgress://``, ``postgres://``), said with the close names: its
    own error was "Can't load plugin: sqlalchemy.dialects:postgress"."""
    from sqlalchemy.dialects import __all__ as known

    from operators.errors import unknown_name_hint

    try:
        url.get_dialect()  # a third-party dialect (an entry point) counts: only one SQLAlchemy cannot load is refused
        return None
    except sa.exc.NoSuchModuleError:
        name = url.get_backend_name()
    if name in known:  # the driver after '+' is the unknown part
        return (f"the task store {shown_url(str(url))!r}: {url.drivername!r} names a driver SQLAlchemy does not "
                f"have for {name}; e.g. postgresql+psycopg://user@host/db")
    return (f"the task store {shown_url(str(url))!r}: {name!r} is not a database SQLAlchemy knows"
            + unknown_name_hint(name, known, "databases")
            + "; e.g. postgresql+psycopg://user@host/db or sqlite:////absolute/path/tasks.db")


def _server_problem(url: sa.URL, note: str) -> str | None:
    """Why a database server's store cannot be reached now: connect (with the service's timeout) and ``SELECT 1``."""
    shown = url.render_as_string(hide_password=True)
    engine = None
    try:
        engine = sa.create_engine(url, poolclass=sa.pool.NullPool, connect_args=connect_args(url))
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
    except (ImportError, sa.exc.SQLAlchemyError, OSError) as err:  # no driver, refused, timed out, bad login
        problem = driver_error(err, 300)
        if "Timeout" in problem.split(":", 1)[0] and "connect_timeout" in connect_args(url):
            problem += f" (no answer within {CONNECT_TIMEOUT_S} s; a slower server: ?connect_timeout=N in the URL)"
        if url.password:
            problem = problem.replace(str(url.password), "***")
        return f"the task store {shown}{note} cannot be opened: {problem}"
    finally:
        if engine is not None:
            engine.dispose()
    return None
