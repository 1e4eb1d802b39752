"""A key revoked in the task store is refused by the running app within its revocation cache's seconds, with no
rebuild or restart: the revocation is written by another engine on the same SQLite file (as ``tessera keys revoke``
or another replica writes it), and the app, served by uvicorn on 127.0.0.1 beside a real ``Service``, answers the
key with a 401 saying it was revoked. A store made before the table gets it when opened; a table that cannot be read
refuses every key (503) until it can."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import requests
import sqlalchemy as sa

from flows.key_revocations import revoke, revoked_keys, unrevoke
from operators.api_keys import key_hash
from serve.security.revocations import REVOCATION_CACHE_S
from serve.service_settings import ServiceArgs, resolve
from serve.tasks.taskstore import TaskStore
from tests.serve.conftest import api_on_localhost

ALICE, BOB, OPS = "alice-key-0123456789", "bob-key-0123456789", "ops-key-0123456789"
#: The cache the tests run with: short, so waiting for it costs little; the documented one is REVOCATION_CACHE_S.
TEST_CACHE_S = 0.3


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.process)])
def store_url(request, tmp_path) -> str:
    """The app's task store: a SQLite file, or a new database on the session's PostgreSQL server (the cluster
    configs' store, which replicas on several nodes share)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tasks.db'}"
    server = request.getfixturevalue("postgres_server")
    name = f"tessera_revoke_{uuid.uuid4().hex[:12]}"
    server.psql(f"CREATE DATABASE {name};")
    return server.get_uri(name).replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture
def app(tmp_path, monkeypatch, store_url):
    """The API with keys ``alice``, ``bob`` and the admin ``ops`` over the store; yields its URL, the service and
    the store's URL."""
    from serve.service import Service

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    url = store_url
    config = resolve(ServiceArgs(default_index=None, task_store=url, spare_task_workers=0,
                                 api_keys=[{"id": "alice", "sha256": key_hash(ALICE)},
                                           {"id": "bob", "sha256": key_hash(BOB)},
                                           {"id": "ops", "sha256": key_hash(OPS), "admin": True}]), environ={})
    service = Service(config, [], "tessera")
    service.revocations.ttl = TEST_CACHE_S
    try:
        with api_on_localhost(config["keys"]) as base:
            yield base, service, url
    finally:
        service.close()


def tasks_of(base: str, key: str) -> requests.Response:
    return requests.get(f"{base}/tasks", headers={"Authorization": f"Bearer {key}"}, timeout=30)


def refused_within(base: str, key: str, seconds: float) -> tuple[requests.Response, float]:
    """The first refusal of ``key`` and how long after now it came (fails after ``seconds``)."""
    start = time.monotonic()
    while (answer := tasks_of(base, key)).status_code == 200:
        assert time.monotonic() - start < seconds, f"still accepted after {seconds} s"
        time.sleep(0.05)
    return answer, time.monotonic() - start


def test_a_key_revoked_in_the_store_is_refused_without_a_restart(app):
    base, service, url = app
    assert tasks_of(base, ALICE).status_code == 200
    other = sa.create_engine(url)  # another process's connection: the command line's, another replica's
    assert revoke(other, key_hash(ALICE), "alice", "cli tester@host")["key_id"] == "alice"
    refused, after = refused_within(base, ALICE, TEST_CACHE_S + 5)
    assert after <= TEST_CACHE_S + 1
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"] == "Bearer"
    error = refused.json()["error"]
    assert error["code"] == "invalid_api_key" and "revoked" in error["message"], error
    assert "alice" not in refused.text and key_hash(ALICE) not in refused.text  # nothing about the key's owner
    assert tasks_of(base, BOB).status_code == 200  # the other key is untouched
    assert revoke(other, key_hash(ALICE), "alice", "again") is None  # revoked once: the first row is kept
    with other.connect() as conn:
        assert conn.execute(sa.select(revoked_keys.c.by)).scalars().all() == ["cli tester@host"]
    assert unrevoke(other, key_hash(ALICE))  # undone: let in again, as quickly
    time.sleep(TEST_CACHE_S + 0.1)
    assert tasks_of(base, ALICE).status_code == 200
    other.dispose()


@pytest.mark.process
@pytest.mark.slow  # three commands and two waits of up to 5 s
def test_tessera_keys_revoke_stops_a_key_of_the_running_app_within_the_documented_seconds(app, tmp_path):
    """The real command, in a process of its own, given the config the service runs: the app refuses the key
    within REVOCATION_CACHE_S (the documented 5 s, not the tests' shorter cache), and lets it in again once
    ``tessera keys unrevoke`` ran."""
    import yaml

    base, service, url = app
    service.revocations.ttl = REVOCATION_CACHE_S
    config = tmp_path / "serve.yaml"
    service_args = {"task_store": url, "api_keys": [{"id": "alice", "sha256": key_hash(ALICE)},
                                                    {"id": "bob", "sha256": key_hash(BOB)}]}
    config.write_text(yaml.safe_dump({"applications": [{"name": "tessera", "import_path": "serve.app:build_app",
                                                        "args": {"models": [], "service": service_args}}]}))
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo), "TESSERA_HOME": str(tmp_path / "home")}

    def tessera(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "flows", "keys", *args, "--config", str(config)], cwd=repo,
                              env=env, capture_output=True, text=True, timeout=120)

    assert tasks_of(base, ALICE).status_code == 200
    done = tessera("revoke", "--id", "alice")
    assert done.returncode == 0 and "revoked key 'alice'" in done.stdout, done.stderr
    refused, _ = refused_within(base, ALICE, REVOCATION_CACHE_S + 1)
    assert refused.status_code == 401 and "revoked" in refused.json()["error"]["message"]
    assert tasks_of(base, BOB).status_code == 200
    missing = tessera("revoke", "--id", "carol")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "'carol'" in missing.stderr
    assert tessera("unrevoke", "--id", "alice").returncode == 0
    start = time.monotonic()
    while tasks_of(base, ALICE).status_code != 200:
        assert time.monotonic() - start < REVOCATION_CACHE_S + 1
        time.sleep(0.1)


def test_the_documented_cache_is_a_few_seconds():
    assert 1 <= REVOCATION_CACHE_S <= 10


def test_revocations_that_cannot_be_read_refuse_every_key(app):
    """Fail closed: while the table cannot be read, no key is let in (a 503 naming no detail of the store); the
    routes without a key still answer; once it can be read again, keys are let in."""
    base, service, url = app
    other = sa.create_engine(url)
    with other.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE revoked_keys RENAME TO revoked_keys_away")
    time.sleep(TEST_CACHE_S + 0.1)
    refused = tasks_of(base, BOB)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "task_store_unavailable"
    assert "tasks.db" not in refused.text and "tessera_revoke" not in refused.text  # nothing of the store
    assert requests.get(f"{base}/openapi.json", timeout=30).status_code == 200  # a route without a key answers
    with other.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE revoked_keys_away RENAME TO revoked_keys")
    time.sleep(TEST_CACHE_S + 0.1)
    assert tasks_of(base, BOB).status_code == 200
    other.dispose()


def test_a_store_made_before_revocations_gets_the_table(tmp_path):
    """An older store file (no ``revoked_keys``) keeps its rows and gets the table when the service opens it."""
    url = f"sqlite:///{tmp_path / 'tasks.db'}"
    old = TaskStore(url)
    task_id = old.create_task("alice", "hybrid", {}, [{"qid": "1", "query": "q"}], ["a"])
    with old.engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE revoked_keys")
    old.engine.dispose()
    store = TaskStore(url)
    assert store.task(task_id, "alice")["flow"] == "hybrid"
    assert revoke(store.engine, key_hash(ALICE), "alice", "test") is not None
    store.engine.dispose()


def call(method: str, url: str, key: str) -> requests.Response:
    return requests.request(method, url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def test_an_admin_key_revokes_a_key_by_id_over_http(app):
    """``POST /v1/admin/keys/{id}/revoke``: this replica refuses the key from the next request (its cache set to a
    minute here), another replica's cache within its seconds; the last admin key may revoke itself; other keys get a
    403, an id no key has a 404."""
    import asyncio

    from serve.security.revocations import Revocations

    base, service, url = app
    service.revocations.ttl = 60
    for method, path in (("GET", "/v1/admin/keys"), ("POST", "/v1/admin/keys/alice/revoke")):
        refused = call(method, base + path, BOB)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_only", refused.text
    listed = call("GET", base + "/v1/admin/keys", OPS).json()["keys"]
    assert [(k["id"], k["admin"], k["revoked"]) for k in listed] == [
        ("alice", False, False), ("bob", False, False), ("ops", True, False)]
    other_replica = Revocations(sa.create_engine(url), ttl=TEST_CACHE_S)
    assert not asyncio.run(other_replica.is_revoked(key_hash(ALICE)))

    done = call("POST", base + "/v1/admin/keys/alice/revoke", OPS)
    assert done.status_code == 200, done.text
    assert {k: done.json()[k] for k in ("id", "changed", "revoked_by", "admins_left")} == {
        "id": "alice", "changed": True, "revoked_by": "admin key 'ops'", "admins_left": 1}
    assert tasks_of(base, ALICE).status_code == 401 and tasks_of(base, BOB).status_code == 200
    time.sleep(TEST_CACHE_S + 0.1)
    assert asyncio.run(other_replica.is_revoked(key_hash(ALICE)))
    other_replica.engine.dispose()
    assert call("POST", base + "/v1/admin/keys/alice/revoke", OPS).json()["changed"] is False
    missing = call("POST", base + "/v1/admin/keys/carol/revoke", OPS)
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "key_id"
    assert "'carol'" in missing.json()["error"]["message"]
    assert [k["revoked"] for k in call("GET", base + "/v1/admin/keys", OPS).json()["keys"]] == [True, False, False]

    last = call("POST", base + "/v1/admin/keys/ops/revoke", OPS)  # a leaked admin key must go, the last one too
    assert last.status_code == 200 and last.json()["admins_left"] == 0
    assert call("GET", base + "/v1/admin/keys", OPS).status_code == 401
