"""``/healthz`` checks what the flow routes need besides the models: the task store answers (a ``SELECT 1``) and
``$TESSERA_HOME`` is writable; and a task store that cannot be opened stops the replica with one line naming
``task_store`` and the path. Real SQLite files and a real PostgreSQL database, a real ``Service``."""

from __future__ import annotations

import asyncio
import shutil
from types import SimpleNamespace

import pytest
import sqlalchemy as sa

from serve.http.errors import ApiError
from serve.health import home_problem, service_readiness
from serve.service_settings import ServiceArgs, resolve
from serve.tasks.taskstore import TaskStore, TaskStoreError


def make(tmp_path, store_url: str, monkeypatch):
    from serve.service import Service

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=None, task_store=store_url, spare_task_workers=0, task_retention_days=0)
    return Service(resolve(args, environ={}), [], "tessera")


async def healthz(service) -> dict:
    """The ingress's ``/healthz`` handler (``serve.api.ModelAPI.healthz``) for an app without models."""
    from serve.api import ModelAPI

    async def no_models():
        return []

    replica = SimpleNamespace(cards=[], service=service, _live_cards=no_models)
    return await ModelAPI.func_or_class.healthz(replica)


def test_a_sqlite_store_that_goes_away_is_a_503_naming_task_store(tmp_path, monkeypatch, caplog):
    service = make(tmp_path, f"sqlite:///{tmp_path / 'store' / 'tasks.db'}", monkeypatch)
    assert asyncio.run(service_readiness(service)) == []
    assert asyncio.run(healthz(service)) == {"status": "ok", "models": {}, "task_store": "ok", "tessera_home": "ok"}

    shutil.rmtree(tmp_path / "store")
    (tmp_path / "store").write_text("not a folder")  # the replica's pooled connection still reads the lost file
    with pytest.raises(ApiError) as err:
        asyncio.run(healthz(service))
    assert err.value.status == 503 and err.value.param == "task_store" and err.value.code == "not_ready"
    assert "task_store" in err.value.message and "tasks.db" in err.value.message
    # /healthz answers without a key: it names the file, never where it lies; the log has the path, once
    assert str(tmp_path) not in err.value.message
    logged = [r.getMessage() for r in caplog.records if r.name == "serve.health"]
    assert logged == [f"not ready: task_store: the SQLite file {tmp_path / 'store' / 'tasks.db'} is gone"]
    assert err.value.extra == {"models": {}}  # each model's state, as the 200 has it (the web UI's badge reads it)


@pytest.mark.process
def test_a_postgresql_store_that_goes_away_is_a_503_naming_task_store(tmp_path, monkeypatch, postgres_server,
                                                                      postgres_database):
    service = make(tmp_path, postgres_database, monkeypatch)
    service.store.create_task("alice", "flow", {}, [], [])
    assert asyncio.run(service_readiness(service)) == []

    name = sa.engine.make_url(postgres_database).database
    postgres_server.psql(f"DROP DATABASE {name} WITH (FORCE);")  # its connections end, no new one opens
    problems = asyncio.run(service_readiness(service))
    assert len(problems) == 1 and problems[0].startswith("task_store: postgresql+psycopg://"), problems
    assert name in problems[0]
    with pytest.raises(ApiError) as err:
        asyncio.run(healthz(service))
    assert err.value.status == 503 and err.value.param == "task_store"


def test_an_unwritable_tessera_home_is_named(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    assert home_problem(home, home / "indices") is None  # a folder made when first needed may be absent
    assert home_problem(tmp_path / "new" / "home") is None
    (home / "indices").write_text("a file")
    assert home_problem(home, home / "indices") == f"tessera_home: {home / 'indices'} is not a folder"
    assert home_problem(home / "indices" / "sub") == f"tessera_home: {home / 'indices'} is not a folder"


def test_a_store_under_a_plain_file_fails_in_one_line_naming_task_store(tmp_path, monkeypatch):
    (tmp_path / "afile").write_text("")
    url = f"sqlite:///{tmp_path / 'afile' / 'tasks.db'}"
    with pytest.raises(TaskStoreError) as err:
        TaskStore(url)
    message = str(err.value)
    assert "\n" not in message and err.value.field == "task_store"
    assert message.startswith("field 'task_store': the task store sqlite:///") and str(tmp_path / "afile") in message
    with pytest.raises(TaskStoreError, match="task_store"):  # the replica's start: the same error, not a traceback
        make(tmp_path, url, monkeypatch)


def test_a_store_url_with_a_password_never_shows_it(tmp_path):
    with pytest.raises(TaskStoreError) as err:
        TaskStore("postgresql+psycopg://tessera:s3cret@127.0.0.1:1/tasks")
    assert "s3cret" not in str(err.value) and "tessera:***@127.0.0.1:1/tasks" in str(err.value)
