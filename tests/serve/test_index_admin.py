"""An admin key reclaims the indices of a key that was removed: ``GET /v1/admin/indices`` lists every index the
service made with its owner, ``DELETE /v1/admin/indices/{name}`` deletes any of them; any other key gets a 403. Over
real HTTP: the API's app served by uvicorn on 127.0.0.1 (its key guard configured as the ingress configures it),
beside a ``Service`` over a real SQLite task store, the index made by a real upload ingested in this process."""

from __future__ import annotations


import pytest
import requests

from operators.api_keys import key_hash
from serve.indices.documents import DocumentsRequest
from serve.tasks.ingest_task import run_ingest
from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import api_on_localhost

pytestmark = pytest.mark.integration  # MiniLM loads in this process

ADMIN, BOB = "admin-key-0123456789", "bob-key-0123456789"


@pytest.fixture
def app(tmp_path, monkeypatch):
    """The API with keys ``root`` (admin) and ``bob``; ``alice``'s key is gone, her index ``notes`` is left."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0,
                       api_keys=[{"id": "root", "sha256": key_hash(ADMIN), "admin": True},
                                 {"id": "bob", "sha256": key_hash(BOB)}])
    config = resolve(args, environ={})
    assert config["admins"] == ["root"]
    service = Service(config, [], "tessera")
    queued = service.indices.add("notes", DocumentsRequest.model_validate(
        {"documents": [{"id": "bees", "text": "honey bees make honey"}]}), "alice")
    run_ingest(service.store, queued["task_id"], service.store.task(queued["task_id"], None)["spec"]["ingest"])
    with api_on_localhost(config["keys"]) as base:
        yield base, service


def call(method: str, url: str, key: str) -> requests.Response:
    return requests.request(method, url, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def test_only_an_admin_key_lists_and_deletes_every_keys_indices(app):
    base, service = app
    for method, path in (("GET", "/v1/admin/indices"), ("DELETE", "/v1/admin/indices/notes")):
        refused = call(method, base + path, BOB)
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_only", refused.text
    assert call("GET", base + "/v1/indices", BOB).json()["indices"] == []  # alice's index is private
    listed = call("GET", base + "/v1/admin/indices", ADMIN).json()["indices"]
    assert [(e["name"], e["owner"], e["chunks"]) for e in listed] == [("notes", "alice", 1)]

    deleted = call("DELETE", base + "/v1/admin/indices/notes", ADMIN)
    assert deleted.status_code == 200 and deleted.json() == {"index": "notes", "deleted": True, "owner": "alice"}
    assert not (service.indices.folder / "notes").exists() and service.store.index("notes") is None
    assert call("GET", base + "/v1/admin/indices", ADMIN).json()["indices"] == []
    missing = call("DELETE", base + "/v1/admin/indices/notes", ADMIN)
    assert missing.status_code == 404 and missing.json()["error"]["param"] == "name"
    service.indices.add("notes", DocumentsRequest.model_validate(  # the name is free again
        {"documents": [{"id": "ants", "text": "ants farm aphids"}]}), "bob")
    assert service.store.index("notes")["owner"] == "bob"


def test_an_index_whose_row_is_gone_is_listed_from_its_owner_file(app):
    base, service = app
    with service.store.engine.begin() as conn:
        from serve.tasks.taskstore import indices

        conn.execute(indices.delete())
    listed = call("GET", base + "/v1/admin/indices", ADMIN).json()["indices"]
    assert [(e["name"], e["owner"]) for e in listed] == [("notes", "alice")]
    assert call("DELETE", base + "/v1/admin/indices/notes", ADMIN).status_code == 200
    assert not (service.indices.folder / "notes").exists()
