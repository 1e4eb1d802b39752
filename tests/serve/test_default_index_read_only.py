"""The default index is every key's and read-only over HTTP, also before it is built: `tessera serve --index
handbook` names $TESSERA_HOME/indices/handbook, and the first key to upload to that free name took the index every
other key's search reads, whose searches then failed with a 403 about a field they never sent. And the ingest specs
listed to every key name no folder of the server. A ``Service`` with a real SQLite task store, no Ray."""

from __future__ import annotations

import pytest

from serve.indices.documents import DocumentsRequest
from serve.http.errors import ApiError


@pytest.fixture
def service(tmp_path, monkeypatch):
    from serve.service import Service
    from serve.service_settings import ServiceArgs, resolve

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=str(tmp_path / "home" / "indices" / "handbook"),
                       task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0)
    return Service(resolve(args, environ={}), [], "tessera")


def test_the_default_index_not_built_yet_is_refused_to_an_upload_and_nothing_is_made(service):
    request = DocumentsRequest.model_validate({"documents": [{"id": "z1", "text": "hello world"}]})
    with pytest.raises(ApiError) as err:
        service.indices.add("handbook", request, "alice")
    assert (err.value.status, err.value.code, err.value.param) == (403, "index_read_only", "name")
    assert "the service's default index" in err.value.message
    assert service.store.index("handbook") is None and not (service.indices.folder / "handbook").exists()
    assert not (service.indices.uploads / "handbook").exists()
    other = service.indices.add("notes", request, "alice")  # another name is still the caller's to make
    assert other["created"] and service.store.index("notes")["owner"] == "alice"


def test_the_ingest_specs_say_a_missing_model_without_the_servers_folders(service):
    missing = {spec["name"]: spec["missing"] for spec in service.indices.specs()}
    assert missing["ingest_static"] is not None and "$TESSERA_HOME/models" in missing["ingest_static"]
    assert str(service.indices.folder.parent) not in missing["ingest_static"]


def test_the_default_index_outside_the_home_is_refused_by_its_name_over_http(tmp_path, monkeypatch):
    """The packaged config's default, ``./.tessera/indices/sample``, is outside $TESSERA_HOME: an upload to ``sample``
    made a second index of the default's name, which the default's searches never read."""
    import requests

    from serve.service import Service
    from serve.service_settings import ServiceArgs, resolve
    from tests.serve.conftest import api_on_localhost, two_document_index

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    two_document_index(tmp_path / "elsewhere" / "sample")
    args = ServiceArgs(default_index=str(tmp_path / "elsewhere" / "sample"),
                       task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0)
    service = Service(resolve(args, environ={}), [], "tessera")
    with api_on_localhost() as base:
        answer = requests.post(f"{base}/v1/indices/sample/documents", timeout=60,
                               json={"documents": [{"id": "z1", "text": "hello world"}]})
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == ("index_read_only", "name") and "'sample'" in error["message"], error
    assert service.store.index("sample") is None and not (service.indices.folder / "sample").exists()


def test_the_listing_names_each_index_the_caller_may_not_change_in_the_words_of_its_403(tmp_path, monkeypatch):
    """GET /v1/indices' ``read_only``: the web UI asked to confirm a deletion of documents from the default index
    (its name, ``sample``, listed nowhere: it is outside $TESSERA_HOME), then got a 403 it could have known of."""
    import requests

    from serve.service import Service
    from serve.service_settings import ServiceArgs, resolve
    from tests.serve.conftest import api_on_localhost, two_document_index

    home = tmp_path / "home"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    two_document_index(tmp_path / "elsewhere" / "sample")
    for name in ("built", "theirs", "mine"):  # built: by `tessera ingest`, no owner
        two_document_index(home / "indices" / name)
    args = ServiceArgs(default_index=str(tmp_path / "elsewhere" / "sample"),
                       task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0)
    service = Service(resolve(args, environ={}), [], "tessera")
    for owner, name in (("bob", "theirs"), ("local", "mine")):  # without keys, the caller is `local`
        task, _ = service.store.create_ingest_task(owner, name, "ingest", {"documents": 2}, ["ingest"], limit=5)
        service.store.finish(task, "finished")
    service.indices.share("theirs", True, "bob")
    with api_on_localhost() as base:
        listing = requests.get(f"{base}/v1/indices", timeout=60).json()
        assert {ix["name"]: ix["writable"] for ix in listing["indices"]} == {
            None: False, "built": False, "theirs": False, "mine": True}
        assert set(listing["read_only"]) == {"sample", "built", "theirs"}, listing["read_only"]
        assert listing["cannot_add"] is None
        for name, why in listing["read_only"].items():
            answer = requests.post(f"{base}/v1/indices/{name}/delete", json={"ids": ["b1"]}, timeout=60)
            assert answer.status_code == 403 and answer.json()["error"]["message"] == f"index '{name}' {why}"
        mine = requests.post(f"{base}/v1/indices/mine/delete", json={"ids": ["nothing"]}, timeout=60)
        assert mine.status_code == 200, mine.text


def test_a_service_whose_index_folder_is_outside_its_roots_says_in_the_listing_that_nothing_can_be_added(
        tmp_path, monkeypatch, caplog):
    """Every upload then gets a 403 (no search could read what it adds); the listing said nothing of it, so the web
    UI offered *Add documents* and *Delete documents* and each failed after the user chose the files. The listing's
    ``cannot_add`` gives the 403's words, without the server's folder, which the service's log names at start."""
    import requests

    from serve.service import Service
    from serve.service_settings import ServiceArgs, resolve
    from tests.serve.conftest import api_on_localhost, two_document_index

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    two_document_index(tmp_path / "elsewhere" / "sample")
    args = ServiceArgs(default_index=str(tmp_path / "elsewhere" / "sample"), index_roots=[str(tmp_path / "elsewhere")],
                       task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0)
    with caplog.at_level("WARNING", logger="tessera.serve"):
        service = Service(resolve(args, environ={}), [], "tessera")
    assert [r.getMessage() for r in caplog.records if "outside the index roots" in r.getMessage()] == [
        f"tessera serve: {service.indices.folder}, where uploads make indices, is outside the index roots "
        f"{tmp_path.resolve() / 'elsewhere'}, {tmp_path.resolve() / 'elsewhere' / 'sample'} "
        "(args.service.index_roots): every upload and change of an index is refused (403)"]
    with api_on_localhost() as base:
        listing = requests.get(f"{base}/v1/indices", timeout=60).json()
        answer = requests.post(f"{base}/v1/indices/notes/documents", timeout=60,
                               json={"documents": [{"id": "z1", "text": "hello world"}]})
    assert answer.status_code == 403, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == ("indices_read_only", "name")
    assert listing["cannot_add"] == error["message"] and "index roots" in error["message"]
    assert str(tmp_path) not in error["message"]
    assert service.store.index("notes") is None and not (service.indices.folder / "notes").exists()
