"""An index a key uploads is private until its owner shares it: another key's search naming it, in the request's
``index`` or in any step's params, is a 403 naming that field, and so is listing its documents. Through
``Service.prepare`` (what every flow route calls first) and ``Indices`` over a real SQLite task store; nothing
runs, so no Ray. Over real HTTP in ``test_indices_api.py``. Also: a store made before the ``shared`` column gets
it, its indices private."""

from __future__ import annotations

import sqlite3

import pytest

from serve.http.errors import ApiError
from serve.service import Service
from serve.tasks.taskstore import TaskStore


@pytest.fixture
def service(make_service):
    service = make_service(indices=("notes", "news"))
    task, why = service.store.create_ingest_task("alice", "news", "ingest", {"documents": 1}, ["ingest"], limit=5)
    assert why == "ok"
    service.store.finish(task, "finished")
    return service


BM25 = {"op": "retrieve.bm25", "params": {"k": 3}}


def refused(service: Service, body: dict, tenant: str) -> ApiError:
    with pytest.raises(ApiError) as err:
        service.prepare({"query": "honey", **body}, tenant)
    assert (err.value.status, err.value.code) == (403, "index_not_shared"), err.value.message
    return err.value


def test_another_keys_index_is_refused_until_its_owner_shares_it(service):
    by_name = {"flow": "bm25", "index": "news"}
    in_a_step = {"flow": {"steps": {"bm25": {**BM25, "params": {"k": 3, "index": "news"}}}}}
    nested = {"flow": {"steps": {"both": {"op": "retrieve.multi_collection", "params": {"collections": [
        {"name": "notes", "index": "notes", "retriever": "bm25"},
        {"name": "news", "index": "news", "retriever": "bm25"}]}}}}}
    assert refused(service, by_name, "bob").param == "index"
    assert "index 'news' belongs to another key" in refused(service, by_name, "bob").message
    assert refused(service, in_a_step, "bob").param == "steps.bm25.params.index"
    assert refused(service, nested, "bob").param == "steps.both.params.collections.1.index"
    with pytest.raises(ApiError) as err:
        service.indices.documents("news", "bob", 0, 10)
    assert (err.value.status, err.value.code) == (403, "index_not_shared")
    for body in (by_name, in_a_step, nested, {"flow": "bm25"}):  # the owner; the default index is everyone's
        service.prepare({"query": "honey", **body}, "alice")
    service.prepare({"query": "honey", "flow": "bm25"}, "bob")

    with pytest.raises(ApiError) as err:  # only the owner shares it
        service.indices.share("news", True, "bob")
    assert (err.value.status, err.value.code) == (403, "index_not_owned")
    assert service.indices.share("news", True, "alice") == {"index": "news", "shared": True}
    for body in (by_name, in_a_step, nested):
        service.prepare({"query": "honey", **body}, "bob")
    service.indices.share("news", False, "alice")
    refused(service, by_name, "bob")


def test_a_store_made_before_sharing_gets_the_column_and_its_indices_stay_private(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # the indices table as stores made before the column have it
        conn.execute("CREATE TABLE indices (name VARCHAR(64) PRIMARY KEY, owner VARCHAR(64) NOT NULL, "
                     "spec VARCHAR(200) NOT NULL, created FLOAT NOT NULL, ingest_task VARCHAR(32))")
        conn.execute("INSERT INTO indices VALUES ('news', 'alice', 'ingest', 1.0, NULL)")
    store = TaskStore(f"sqlite:///{path}")
    assert store.index("news")["shared"] is False
    assert store.share_index("news", "alice", True) and store.index("news")["shared"] is True
    assert not store.share_index("news", "bob", False)  # not bob's
    assert TaskStore(f"sqlite:///{path}").index("news")["shared"] is True  # opened again: nothing added twice


def test_a_folder_inside_another_keys_index_is_refused_as_the_index_is(service):
    """Its ``_ingest/`` or a shard's folder named as an index was answered with what the folder holds ("is a folder but
    no index"), which told another key what is inside it; it is that index's 403."""
    staging = service.indices.folder.resolve() / "news" / "_ingest"
    staging.mkdir()
    for value in (str(staging), str(staging / "no-such-shard")):
        assert refused(service, {"flow": "bm25", "index": value}, "bob").param == "index"
        in_a_step = {"flow": {"steps": {"bm25": {**BM25, "params": {"k": 3, "index": value}}}}}
        assert refused(service, in_a_step, "bob").param == "steps.bm25.params.index"


def test_a_saved_flow_naming_another_keys_index_is_listed_as_refused_until_it_is_shared(service):
    """``GET /flows`` said such a flow was runnable; running it was (rightly) a 403. Its status now says the 403's
    words, per caller: the owner's own flow naming it runs."""
    from flows import store as flow_store
    from flows.spec import FlowSpec
    from serve.runs.flow_status import flow_problem, versions
    from serve.runs.flow_resolution import flow_owner

    spec = FlowSpec.parse({"steps": {"bm25": {**BM25, "params": {"k": 3, "index": "news"}}}})
    for tenant in ("bob", "alice"):
        flow_store.save("news_search", spec, owner=flow_owner(tenant))
    assert "index 'news' belongs to another key" in flow_problem("news_search", "bob", versions())
    assert flow_problem("news_search", "alice", versions()) is None
    service.indices.share("news", True, "alice")
    assert flow_problem("news_search", "bob", versions()) is None
