"""The default index is every key's and read-only over HTTP, also before it is built: `tessera serve --index
handbook` names $TESSERA_HOME/indices/handbook, and the first key to upload to that free name took the index every
other key's search reads, whose searches then failed with a 403 about a field they never sent. And the ingest specs
listed to every key name no folder of the server. A ``Service`` with a real SQLite task store, no Ray."""

from __future__ import annotations

import pytest

from serve.documents import DocumentsRequest
from serve.errors import ApiError


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
