"""Opening a PostgreSQL task store: the service's engine and ``tessera serve``'s start check connect with a short
timeout (``flows.task_store_check.CONNECT_TIMEOUT_S``), so a server that never answers (here a local socket that
listens but never accepts, as a host that drops packets) fails in one line naming the setting instead of hanging
the app's build; and the start check opens a real server's store (the session's PostgreSQL, pgserver) and names
what is wrong with one it cannot."""

from __future__ import annotations

import socket

import pytest
import sqlalchemy as sa

from flows import task_store_check
from flows.task_store_check import CONNECT_TIMEOUT_S, connect_args, task_store_problem
from serve.app import ServeConfigError, check_task_store
from serve.tasks.taskstore import TaskStore

pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")


@pytest.fixture
def silent_url(monkeypatch):
    """A PostgreSQL URL (with a password) on a local port that listens and never accepts: the connection is made by
    the kernel, and nothing ever answers the driver's startup message. The default timeout is shortened to libpq's
    least (2 s) to keep the inner loop short; that the default applies is checked on a real server below."""
    monkeypatch.setattr(task_store_check, "CONNECT_TIMEOUT_S", 2)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        yield f"postgresql+psycopg://tessera:s3cret@127.0.0.1:{listener.getsockname()[1]}/tasks"


@pytest.mark.timeout(10 * CONNECT_TIMEOUT_S)
def test_a_server_that_never_answers_fails_the_store_and_the_build_naming_the_setting(silent_url):
    with pytest.raises(ServeConfigError) as err:  # the app's build opens a TaskStore (a TaskStoreError, reworded)
        check_task_store(silent_url, given=True)
    assert str(err.value).startswith("field 'args.service.task_store': the task store postgresql+psycopg://tessera:"
                                     "***@127.0.0.1") and "\n" not in str(err.value)
    assert "cannot be opened (ConnectionTimeout: connection timeout expired)" in str(err.value)
    assert "s3cret" not in str(err.value)


@pytest.mark.timeout(10 * CONNECT_TIMEOUT_S)
def test_the_start_check_gives_up_on_a_server_that_never_answers(silent_url):
    problem = task_store_problem(silent_url)
    assert problem.startswith("the task store postgresql+psycopg://tessera:***@127.0.0.1:")
    assert "ConnectionTimeout: connection timeout expired (no answer within 2 s" in problem  # the fixture's timeout
    assert "s3cret" not in problem and "\n" not in problem


@pytest.mark.process
def test_the_start_check_opens_a_real_server_and_names_a_database_it_lacks(postgres_server, postgres_database):
    """(``tessera serve`` raises what it names, with the field: tests/flows/test_serve_start_checks.py.)"""
    assert task_store_problem(postgres_database) is None
    missing = postgres_server.get_uri("no_such_db").replace("postgresql://", "postgresql+psycopg://", 1)
    problem = task_store_problem(missing)
    assert problem.startswith("the task store postgresql+psycopg://postgres:***@/no_such_db?host=")
    assert 'OperationalError: connection failed' in problem and 'database "no_such_db" does not exist' in problem


@pytest.mark.process
def test_the_services_connections_carry_the_timeout_unless_the_url_sets_its_own(postgres_database):
    store = TaskStore(postgres_database)
    with store.engine.connect() as conn:  # libpq's own record of the parameters the connection was opened with
        assert conn.connection.dbapi_connection.info.get_parameters()["connect_timeout"] == str(CONNECT_TIMEOUT_S)
    store.engine.dispose()
    own = TaskStore(f"{postgres_database}&connect_timeout=17")  # pgserver's URLs carry ?host=<socket folder>
    with own.engine.connect() as conn:
        assert conn.connection.dbapi_connection.info.get_parameters()["connect_timeout"] == "17"
    own.engine.dispose()
    assert connect_args(sa.engine.make_url("sqlite:///tasks.db")) == {}


@pytest.mark.parametrize("url, said", [
    ("sqlite://tasks.db", "names a host, 'tasks.db', which SQLite has none of; write sqlite:////absolute/path"),
    ("sqlite://", "is an in-memory SQLite store"),
    ("postgress://tessera@db/tessera", "'postgress' is not a database SQLAlchemy knows; did you mean 'postgresql'?"),
    ("postgresql+psycopj://db/t", "'postgresql+psycopj' names a driver SQLAlchemy does not have for postgresql"),
])
def test_a_task_store_url_that_names_no_usable_store_stops_the_start(url, said):
    """Two slashes made an in-memory store, each process's own (the tasks lost at each restart, the task workers'
    writes never seen by the ingress), and both the start check and the build took it; a misspelt database said
    "Can't load plugin: sqlalchemy.dialects:postgress"."""
    from serve.settings import parse_args

    assert said in task_store_problem(url)
    with pytest.raises(ServeConfigError) as err:
        parse_args({"service": {"task_store": url}})
    assert err.value.field == "service.task_store" and said in err.value.message
