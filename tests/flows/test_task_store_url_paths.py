"""The default task store (``$TESSERA_HOME/tasks.db``) under a home whose path holds ``?``, ``%``, ``#``, spaces or
letters such as ``ë`` is that file, for the start check, the service and ``tessera serve``'s lock: ``sqlite:///`` +
the path ended the file at a ``?`` (``/srv/what?/tasks.db`` opened ``/srv/what``) and decoded ``%25`` to ``%``."""

from __future__ import annotations

import pytest

from flows.commands.serve_store_lock import sqlite_stores
from flows.task_store_check import task_store_problem
from flows.task_store_url import absolute_task_store_url, default_task_store_url
from serve.tasks.taskstore_db import make_engine

NAMES = ["what?", "100%25", "a b #1 Zoë", "q?x=1%20"]


@pytest.mark.parametrize("name", NAMES)
def test_the_default_store_is_the_file_in_the_home(tmp_path, name):
    home = tmp_path / name / "home"
    url = default_task_store_url(home)
    assert task_store_problem(url, default=True) is None
    make_engine(url).dispose()  # what the service opens: its tables made
    assert (home / "tasks.db").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing beside the home's folder
    application = {"args": {"service": {}}, "runtime_env": {"env_vars": {"TESSERA_HOME": str(home)}}}
    assert sqlite_stores({"applications": [application]}) == [(home / "tasks.db").resolve()]


def test_a_relative_store_is_made_absolute_in_a_folder_named_so(tmp_path, monkeypatch):
    folder = tmp_path / "what? 100%25"
    folder.mkdir()
    monkeypatch.chdir(folder)
    url = absolute_task_store_url("sqlite:///tasks.db?timeout=5")
    assert url.endswith("?timeout=5")
    make_engine(url).dispose()
    assert [p.name for p in folder.iterdir() if p.name.startswith("tasks.db")][:1] == ["tasks.db"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]


def test_a_message_names_the_store_by_its_path_as_written(tmp_path):
    """SQLAlchemy's rendering of the URL showed ``/home/Zoë`` as ``/home/Zo%C3%AB`` in the service's errors."""
    from flows.task_store_check import shown_url

    home = tmp_path / "Zoë Smith"
    assert shown_url(default_task_store_url(home)) == f"sqlite:///{home.resolve() / 'tasks.db'}"
    assert shown_url(f"sqlite:///{home}/tasks.db?timeout=5") == f"sqlite:///{home}/tasks.db?timeout=5"
