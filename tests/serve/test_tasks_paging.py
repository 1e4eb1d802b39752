"""``GET /tasks`` pages the caller's tasks newest first: ``limit``, the ``before`` cursor of (created, id) so tasks
created at the same time page too, a ``status`` filter; ``counts`` stays the whole set. Over real HTTP (the API's
app under uvicorn on 127.0.0.1, beside a real ``Service``) on real SQLite and PostgreSQL stores; the page is a range
read of the (owner, created, id) index, which a store made before it gets when opened."""

from __future__ import annotations

import base64
import uuid

import pytest
import requests
import sqlalchemy as sa

from serve.security import auth
from serve.tasks.results import progress_body
from serve.service_settings import ServiceArgs, resolve
from serve.tasks.taskstore import TaskStore, tasks
from tests.serve.conftest import api_on_localhost

INDEX = "ix_tasks_owner_created_id"


def made_tasks(store: TaskStore, owner: str, n: int) -> list[str]:
    """``n`` tasks of ``owner``, four at a time created at the same second, some ended in each final state."""
    ids = []
    for i in range(n):
        task_id = store.create_task(owner, f"flow{i}", {}, [{"qid": "1", "query": "q"}], ["a"])
        if i % 3:
            store.finish(task_id, ("failed", "cancelled", "finished")[i % 4 % 3])
        with store.engine.begin() as conn:
            conn.execute(tasks.update().where(tasks.c.id == task_id).values(created=1.7e9 + 0.25 + i // 4))
        ids.append(task_id)
    return ids


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.process)])
def served_store_url(request, tmp_path_factory) -> str:
    """The store the API serves, one per backend for the module: the tests of ``api`` only read it."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('paging') / 'tasks.db'}"
    server = request.getfixturevalue("postgres_server")
    name = f"tessera_paging_{uuid.uuid4().hex[:12]}"
    server.psql(f"CREATE DATABASE {name};")
    return server.get_uri(name).replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture(scope="module")
def api(served_store_url, tmp_path_factory):
    """The API on uvicorn beside a ``Service`` whose store holds 23 tasks of the caller (the ``local`` tenant: no
    keys) and 5 of another key. One per backend for the module (a service, 28 tasks and a server per test were
    most of this file's time): its tests only read."""
    from serve.service import Service

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TESSERA_HOME", str(tmp_path_factory.mktemp("paging-home")))
        service = Service(resolve(ServiceArgs(default_index=None, task_store=served_store_url, spare_task_workers=0),
                                  environ={}), [], "tessera")
        service.pruner.first_round.wait(30)  # its prune at the start (30-day retention) must not meet the old tasks
        store = TaskStore(served_store_url)  # its tasks made after the service's start, which would look for workers
        mine, theirs = made_tasks(store, "local", 23), made_tasks(store, "bob", 5)
        auth.configure({}, None, None)
        with api_on_localhost() as base:
            yield base, store, mine, theirs
        service.pruner.stop()
        store.engine.dispose()
        service.store.engine.dispose()


def newest_first(store: TaskStore, ids: list[str], status: str | None = None) -> list[str]:
    rows = [store.task(i, None) for i in ids]
    return [r["id"] for r in sorted(rows, key=lambda r: (r["created"], r["id"]), reverse=True)
            if status is None or r["status"] == status]


def pages(base: str, **params) -> list[list[str]]:
    """Every page of ``GET /tasks`` with ``params``, following ``next`` to the last."""
    found, before = [], None
    while True:
        body = requests.get(base + "/tasks", params={**params, **({"before": before} if before else {})},
                            timeout=30).json()
        found.append([t["id"] for t in body["tasks"]])
        before = body["next"]
        assert len(found) <= 30, found[-3:]  # more pages than tasks: a cursor that does not move on
        if before is None:
            return found


def test_pages_give_every_task_once_newest_first_with_equal_times(api):
    base, store, mine, theirs = api
    expected = newest_first(store, mine)
    for limit in (1, 3, 4, 5, 22, 23):
        got = pages(base, limit=limit)
        assert [t for page in got for t in page] == expected, limit  # once each, in order, none of bob's
        assert [len(page) for page in got[:-1]] == [limit] * (len(got) - 1) and 0 < len(got[-1]) <= limit
    whole = requests.get(base + "/tasks", params={"limit": 1000}, timeout=30).json()
    assert [t["id"] for t in whole["tasks"]] == expected and whole["next"] is None
    first = requests.get(base + "/tasks", timeout=30).json()  # default limit 100: all 23, and no next page
    assert [t["id"] for t in first["tasks"]] == expected and first["next"] is None
    assert set(first["tasks"][0]) == {"id", "status", "flow", "created", "updated", "steps_done", "steps_total",
                                      "error"}
    assert {t["steps_total"] for t in first["tasks"]} == {1}  # made_tasks' tasks have one step each


def test_a_status_pages_its_own_tasks_and_counts_stay_whole(api):
    base, store, mine, _ = api
    counts = requests.get(base + "/tasks", params={"limit": 2}, timeout=30).json()["counts"]
    assert counts == store.status_counts("local") and sum(counts.values()) == len(mine)
    assert set(counts) == {"queued", "failed", "cancelled", "finished"}
    for status in ("queued", "failed", "cancelled", "finished", "running"):
        got = pages(base, limit=2, status=status)
        assert [t for page in got for t in page] == newest_first(store, mine, status), status
        filtered = requests.get(base + "/tasks", params={"limit": 2, "status": status}, timeout=30).json()
        assert all(t["status"] == status for t in filtered["tasks"]) and filtered["counts"] == counts


def test_another_keys_tasks_never_appear(api):
    base, store, mine, theirs = api
    bob = store.task(theirs[-1], None)  # a cursor made from bob's newest task still lists only the caller's
    from serve.routes.tasks import cursor

    listed = requests.get(base + "/tasks", params={"before": cursor(bob), "limit": 1000}, timeout=30).json()
    assert listed["tasks"] and not {t["id"] for t in listed["tasks"]} & set(theirs)
    assert {t["id"] for t in listed["tasks"]} <= set(mine)
    assert sum(listed["counts"].values()) == len(mine)


@pytest.mark.parametrize("params,field", [
    ({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"limit": "ten"}, "limit"),
    ({"status": "done"}, "status"), ({"before": "not-a-cursor"}, "before"), ({"before": "WzEsMl0"}, "before"),
    ({"before": "eyJhIjogMX0"}, "before")])  # [1,2] has no id string; {"a": 1} is no pair
def test_a_bad_limit_status_or_cursor_is_a_422_naming_it(api, params, field):
    refused = requests.get(api[0] + "/tasks", params=params, timeout=30)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["param"] == field and error["message"].startswith(f"{field}: "), error


def crafted(pair: str) -> str:
    """A cursor as ``cursor`` encodes one, of ``pair``'s JSON text as it is written (no ``json.dumps``)."""
    return base64.urlsafe_b64encode(pair.encode()).decode().rstrip("=")


@pytest.mark.parametrize("pair", [
    '[1.0, "\\ud83d"]',  # a lone surrogate: JSON holds it, no database text column does (SQLite raised a 500)
    '[1.0, "a\\u0000b"]',  # a NUL: PostgreSQL's text refuses one
    '[NaN, "a"]', '[Infinity, "a"]', '[-Infinity, "a"]', '[1e400, "a"]',  # Python's JSON reads these
    "[" + "9" * 400 + ', "a"]',  # an integer past any float (float() raised OverflowError)
    "[" + "9" * 5000 + ', "a"]',  # past the digits Python's int() reads
])
def test_a_crafted_cursor_of_no_task_is_a_422_naming_before(api, pair):
    """Decoded, each is a pair of a number and a string, as ``cursor`` writes one, but of no task: no time a task is
    created at or no id a store holds; every one was a 500 from the store or the float, or paged from nowhere."""
    refused = requests.get(api[0] + "/tasks", params={"before": crafted(pair)}, timeout=30)
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert (error["param"], error["code"]) == ("before", "invalid_cursor") and error["message"].startswith("before: ")


def test_a_listed_task_says_its_steps_total_from_its_row_as_its_progress_does(store_url):
    """``steps_total`` beside ``steps_done`` (the Tasks tab shows "2 / 3"): the steps its row holds, which an upload
    that compacts its index makes three, as ``/task/progress`` counts them."""
    store = TaskStore(store_url)
    three = store.create_task("carol", "hybrid", {}, [{"qid": "1", "query": "q"}], ["bm25", "dense", "fused"])
    upload = store.create_task("carol", "ingest", {}, [], ["staging", "ingest"])
    store.update(three, status="running", steps_done=2, current_step="fused")
    store.update(upload, status="running", steps_done=2, steps=["staging", "ingest", "compact"])
    listed = {t["id"]: (t["steps_done"], t["steps_total"]) for t in store.list_tasks("carol")}
    assert listed == {three: (2, 3), upload: (2, 3)}
    assert progress_body(store.task(three, "carol"))["progress"]["pipeline_progress"] == "2/3"


def test_a_page_reads_the_owner_created_id_index(store_url):
    store = TaskStore(store_url)
    ids = made_tasks(store, "local", 3)
    sent = []  # the statement list_tasks sends, with its parameters, explained as the database runs it

    def record(_conn, _cursor, statement, params, *_):
        sent.append((statement, params))

    before = (store.task(ids[-1], None)["created"], ids[-1])
    sa.event.listen(store.engine, "before_cursor_execute", record)
    store.list_tasks("local", limit=2, before=before)
    sa.event.remove(store.engine, "before_cursor_execute", record)
    statement, params = next((st, p) for st, p in sent if st.lstrip().upper().startswith("SELECT"))
    with store.engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            plan = " ".join(str(row[-1]) for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params))
            assert f"INDEX {INDEX} (owner=? AND created<?)" in plan and "TEMP B-TREE" not in plan, plan  # no sort
        else:
            conn.exec_driver_sql("SET enable_seqscan = off")  # three rows: the planner would read the table
            plan = " ".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + statement, params))
            assert INDEX in plan and "Sort" not in plan, plan


def test_a_store_made_before_the_index_gets_it_when_opened(store_url):
    store = TaskStore(store_url)
    ids = made_tasks(store, "local", 2)
    with store.engine.begin() as conn:  # the store as an earlier version made it
        conn.exec_driver_sql(f"DROP INDEX {INDEX}")
    assert INDEX not in {i["name"] for i in sa.inspect(store.engine).get_indexes("tasks")}
    store.engine.dispose()
    reopened = TaskStore(store_url)
    assert INDEX in {i["name"] for i in sa.inspect(reopened.engine).get_indexes("tasks")}
    assert [t["id"] for t in reopened.list_tasks("local")] == newest_first(reopened, ids)
    TaskStore(store_url)  # opened again, nothing to add: no error
