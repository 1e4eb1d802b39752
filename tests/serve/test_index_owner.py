"""An index a key made through the service stays that key's when the task store loses its row (a new or reset
``tasks.db``, a move to another database): its folder's ``owner.json`` says whose it is, and whether it is shared.
Also what an index whose first upload never committed answers: no documents, to every route. Real BM25 indices and
real SQLite task stores, through ``Service`` (what every route calls); nothing runs on Ray."""

from __future__ import annotations

import json

import pytest

from serve.indices.documents import DocumentsRequest
from serve.http.errors import ApiError
from serve.indices.index_owner import OWNER_FILE
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from serve.tasks.taskstore import indices as indices_table
from tests.serve.conftest import run_search, two_document_index

BM25 = {"op": "retrieve.bm25", "params": {"k": 3}}


@pytest.fixture
def home(tmp_path, monkeypatch):
    """``news``: made by alice through the service (its row in tasks.db); ``plain``: built by `tessera ingest`, the
    default index (no row, no owner file)."""
    home = tmp_path / "home"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    for name in ("news", "plain"):
        two_document_index(home / "indices" / name)
    store = start(tmp_path, "tasks.db").store
    task, why = store.create_ingest_task("alice", "news", "ingest", {"documents": 2}, ["ingest"], limit=5)
    assert why == "ok" and store.finish(task, "finished")
    return home


def start(tmp_path, db: str, **limits) -> Service:
    """A replica's service over the task store ``db`` (a new file is a store that lost every row)."""
    args = ServiceArgs(default_index=str(tmp_path / "home" / "indices" / "plain"),
                       task_store=f"sqlite:///{tmp_path / db}", limits=limits)
    return Service(resolve(args, environ={}), [], "tessera")


def refused(service: Service, body: dict, tenant: str, status: int = 403) -> ApiError:
    with pytest.raises(ApiError) as err:
        service.prepare({"query": "honey", **body}, tenant, search=True)
    assert err.value.status == status, err.value.message
    return err.value


def owner_file(home, name: str) -> dict:
    return json.loads((home / "indices" / name / OWNER_FILE).read_text())


def forget_rows(service: Service) -> None:
    """The task store loses its rows of indices while the service runs."""
    with service.store.engine.begin() as conn:
        conn.execute(indices_table.delete())


def searched(service: Service, tenant: str, index: str) -> list[str]:
    found = run_search({"flow": "bm25", "query": "honey bees", "index": index, "top_k": 2}, tenant)
    return [hit["docno"] for hit in found["results"][0]["hits"]]


def test_a_new_task_store_keeps_an_uploaded_index_private_to_its_owner(home, tmp_path):
    start(tmp_path, "tasks.db")  # the index was made before owner files: a replica's start writes its file
    assert owner_file(home, "news")["owner"] == "alice" and owner_file(home, "news")["shared"] is False

    service = start(tmp_path, "new-tasks.db")  # a reset tasks.db (or another database): the row comes back
    restored = service.store.index("news")
    assert (restored["owner"], restored["shared"], restored["spec"]) == ("alice", False, "ingest")
    check_private_to_alice(service)


def test_without_its_row_the_owner_file_decides_who_reads_an_index(home, tmp_path):
    service = start(tmp_path, "tasks.db")
    forget_rows(service)
    check_private_to_alice(service)
    assert service.store.index("news") is None  # reading puts nothing back

    with pytest.raises(ApiError) as err:  # another key cannot claim it
        service.indices.add("news", DocumentsRequest(documents=[{"id": "x", "text": "y"}]), "bob")
    assert (err.value.status, err.value.code) == (403, "index_not_owned")
    assert service.indices.share("news", True, "alice") == {"index": "news", "shared": True}  # the owner's change
    assert service.store.index("news")["owner"] == "alice" and owner_file(home, "news")["shared"] is True
    forget_rows(service)
    assert searched(service, "bob", "news")[0] == "bees#0"  # shared, says the file
    assert "news" in {entry["name"] for entry in service.indices.listing("bob")}


def check_private_to_alice(service: Service) -> None:
    """Every way bob could read ``news`` is refused naming its field; alice searches it; ``plain`` is everyone's."""
    assert refused(service, {"flow": "bm25", "index": "news"}, "bob").param == "index"
    in_a_step = {"flow": {"steps": {"bm25": {**BM25, "params": {"k": 3, "index": "news"}}}}}
    assert refused(service, in_a_step, "bob").param == "steps.bm25.params.index"
    with pytest.raises(ApiError) as err:
        service.indices.documents("news", "bob", 0, 10)
    assert (err.value.status, err.value.code) == (403, "index_not_shared")
    assert [entry["name"] for entry in service.indices.listing("bob")] == ["plain"]
    mine = {entry["name"]: entry for entry in service.indices.listing("alice")}
    assert mine["news"]["writable"] and not mine["news"]["shared"] and mine["news"]["chunks"] == 2
    assert searched(service, "alice", "news")[0] == "bees#0"
    assert service.indices.documents("news", "alice", 0, 10)["total"] == 2
    assert searched(service, "bob", "plain")[0] == "bees#0"


def test_sharing_keeps_the_owner_file_in_step(home, tmp_path):
    service = start(tmp_path, "tasks.db")
    for shared in (True, False, True):
        service.indices.share("news", shared, "alice")
        assert owner_file(home, "news")["shared"] is shared == service.store.index("news")["shared"]


def test_an_owner_file_that_cannot_be_read_makes_the_index_nobodys(home, tmp_path):
    start(tmp_path, "tasks.db")
    (home / "indices" / "news" / OWNER_FILE).write_text("{not json")
    service = start(tmp_path, "new-tasks.db")
    assert service.store.index("news") is None  # no row is made up from it
    for tenant in ("alice", "bob"):
        assert refused(service, {"flow": "bm25", "index": "news"}, tenant).code == "index_not_shared"
    with pytest.raises(ApiError) as err:
        service.indices.add("news", DocumentsRequest(documents=[{"id": "x", "text": "y"}]), "alice")
    assert (err.value.status, err.value.code) == (403, "index_not_owned")


def test_an_index_whose_first_upload_never_committed_has_no_documents_on_every_route(home, tmp_path):
    service = start(tmp_path, "tasks.db")
    task, _ = service.store.create_ingest_task("alice", "fresh", "ingest", {"documents": 1}, ["ingest"], limit=5)
    service.store.finish(task, "failed", error="the embedder failed")
    listed = {entry["name"]: entry for entry in service.indices.listing("alice")}
    assert listed["fresh"]["chunks"] == 0
    assert service.indices.documents("fresh", "alice", 0, 10)["total"] == 0
    assert service.indices.delete_documents("fresh", ["a", "b"], "alice") == {
        "index": "fresh", "deleted": [], "missing": ["a", "b"], "chunks": 0}
    for body, field in (({"flow": "bm25", "index": "fresh"}, "index"),
                        ({"flow": {"steps": {"bm25": {**BM25, "params": {"k": 3, "index": "fresh"}}}}},
                         "steps.bm25.params.index")):
        err = refused(service, body, "alice", status=409)
        assert (err.param, err.code) == (field, "index_empty") and "has no documents yet" in err.message
    assert refused(service, {"flow": "bm25", "index": "fresh"}, "bob").code == "index_not_shared"
    with pytest.raises(ApiError) as err:
        service.indices.delete_documents("fresh", ["a"], "bob")
    assert (err.value.status, err.value.code) == (403, "index_not_owned")


def test_a_shared_index_whose_first_upload_has_not_committed_has_no_documents_for_every_key(home, tmp_path):
    """Another key was told its search of such an index found one with no documents yet (409 ``index_empty``), while
    its listing left the index out and its documents were a 404 "no index named 'fresh'"."""
    service = start(tmp_path, "tasks.db")
    task, _ = service.store.create_ingest_task("alice", "fresh", "ingest", {"documents": 1}, ["ingest"], limit=5)
    service.indices.share("fresh", True, "alice")
    listed = {entry["name"]: entry for entry in service.indices.listing("bob")}
    assert (listed["fresh"]["chunks"], listed["fresh"]["shared"], listed["fresh"]["writable"]) == (0, True, False)
    assert listed["fresh"]["ingest_task"] is None  # the owner's task, which another key cannot follow
    assert service.indices.documents("fresh", "bob", 0, 10)["total"] == 0
    with pytest.raises(ApiError) as err:
        service.indices.document("fresh", "a", "bob")
    assert (err.value.status, err.value.code) == (404, "document_not_found")
    err = refused(service, {"flow": "bm25", "index": "fresh"}, "bob", status=409)
    assert err.code == "index_empty" and task not in err.message
    service.indices.share("fresh", False, "alice")
    assert "fresh" not in {entry["name"] for entry in service.indices.listing("bob")}
    with pytest.raises(ApiError) as err:
        service.indices.documents("fresh", "bob", 0, 10)
    assert (err.value.status, err.value.code) == (403, "index_not_shared")


@pytest.mark.integration  # MiniLM loads in this process
def test_an_upload_writes_the_owner_file_before_its_ingestion_runs(home, tmp_path):
    service = start(tmp_path, "tasks.db")
    queued = service.indices.add("notes", DocumentsRequest(documents=[{"id": "a", "text": "honey bees"}]), "alice")
    assert queued["created"] and owner_file(home, "notes")["owner"] == "alice"
    two_document_index(home / "indices" / "notes")  # what its ingestion commits
    service = start(tmp_path, "new-tasks.db")
    assert refused(service, {"flow": "bm25", "index": "notes"}, "bob").code == "index_not_shared"
    assert searched(service, "alice", "notes")[0] == "bees#0"


def test_an_owner_file_being_written_does_not_make_a_new_index_folder_foreign(tmp_path, monkeypatch):
    """What a second upload creating the same index sees while the first writes ``owner.json``: its temporary file
    was a stranger's (``.owner.json.x7f…``), so that upload was refused as writing into "a folder of other files"
    (a 422 naming ``spec``) instead of waiting its turn (409 ``index_busy``)."""
    import os

    from operators.store.layout import foreign_entries
    from serve.indices import index_owner

    folder, seen = tmp_path / "fresh", []

    def replace(source, target):
        seen.append((sorted(p.name for p in folder.iterdir()), foreign_entries(folder)))
        os.rename(source, target)

    monkeypatch.setattr(index_owner.os, "replace", replace)
    index_owner.write_owner(folder, {"owner": "alice", "shared": False, "spec": "ingest", "created": 1.0})
    [(names, foreign)] = seen
    assert len(names) == 1 and foreign == [], names  # the file being written, and nothing foreign
    assert sorted(p.name for p in folder.iterdir()) == [OWNER_FILE] and foreign_entries(folder) == []


def test_a_long_document_id_or_index_name_is_quoted_cut_in_the_refusal(home, tmp_path):
    """The 404 of a missing document repeated an id of any length in full (the URL's path may be megabytes), where
    other messages cut what they quote to 60 characters."""
    service = start(tmp_path, "tasks.db")
    for call, status, param in ((lambda: service.indices.document("news", "d" * 5000, "alice"), 404, "id"),
                                (lambda: service.indices.documents("n" * 5000, "alice", 0, 10), 422, "name")):
        with pytest.raises(ApiError) as err:
            call()
        assert (err.value.status, err.value.param) == (status, param)
        assert len(err.value.message) < 300 and "…'" in err.value.message, err.value.message[:200]
