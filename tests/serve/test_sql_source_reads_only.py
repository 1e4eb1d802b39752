"""A ``sources.sql`` step a client sends may name a SQLite file under the service's data roots, and only read it:
before, its query ran as written, so ``DROP TABLE`` dropped the table in the data root (SQLite's driver commits DDL at
once) and ``VACUUM INTO '/any/path'`` wrote a file outside every root. Over real HTTP (the service's app under uvicorn
on 127.0.0.1 with a non-admin key), the task on real Ray actors, a real SQLite file."""

from __future__ import annotations

import sqlite3

import pytest
import requests

from operators.api_keys import key_hash
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import api_on_localhost

pytestmark = pytest.mark.ray

KEY = "bob-key-0123456789abcdef"


@pytest.fixture
def served(ray_session, tmp_path, monkeypatch):
    """The API over a service whose one data root holds ``docs.db`` (table ``d``): its base URL and the database."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    data = tmp_path / "data"
    data.mkdir()
    with sqlite3.connect(data / "docs.db") as db:
        db.execute("CREATE TABLE d (id TEXT, text TEXT)")
        db.execute("INSERT INTO d VALUES ('1', 'honey bees')")
    db.close()
    args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0,
                       data_roots=[str(data)], api_keys=[{"id": "bob", "sha256": key_hash(KEY)}])
    config = resolve(args, environ={})
    Service(config, [], "tessera")
    with api_on_localhost(config["keys"]) as base:
        yield base, data / "docs.db"


def run(base: str, database, query: str) -> dict:
    step = {"op": "sources.sql", "params": {"url": f"sqlite:///{database}", "query": query, "id_field": "id"}}
    response = requests.post(base + "/task/run", json={"flow": {"steps": {"s": step}}},
                             headers={"Authorization": f"Bearer {KEY}"}, timeout=300)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_query_reads_the_file_and_may_neither_change_it_nor_write_another(served, tmp_path):
    base, database = served
    assert run(base, database, "SELECT id, text FROM d")["status"] == "finished"
    outside = tmp_path / "outside.db"
    for query in ("DROP TABLE d", f"VACUUM INTO '{outside}'", f"ATTACH '{outside}' AS x", "DELETE FROM d"):
        task = run(base, database, query)
        assert task["status"] == "failed" and "not authorized" in task["progress"]["log"].replace(
            "authorization denied", "not authorized"), task
    assert not outside.exists()
    with sqlite3.connect(database) as db:
        assert db.execute("SELECT id, text FROM d").fetchall() == [("1", "honey bees")]
    db.close()
