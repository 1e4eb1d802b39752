"""``max_metadata_keys``: an upload whose documents, with the index's, would hold more metadata keys than the limit
is a 422 naming ``documents`` (or ``files``) and the limit, before anything is written or queued. Each key is a
column of every shard of the index's doc store: a 1 MB upload of keys of its own made tens of thousands, which every
later search and commit read. A real ``Service`` (SQLite task store, no Ray), a real BM25 index in tmp_path."""

from __future__ import annotations

import pyarrow as pa
import pytest

from serve.http.errors import ApiError
from serve.indices.documents import DocumentsRequest, files_request
from serve.indices.index_reading import column_types, refuse_many_keys
from serve.service_settings import Limits
from tests.serve.conftest import two_document_index


@pytest.fixture
def service(tmp_path, monkeypatch):
    from serve.service import Service
    from serve.service_settings import ServiceArgs, resolve

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}", spare_task_workers=0,
                       limits=Limits(max_metadata_keys=3))
    return Service(resolve(args, environ={}), [], "tessera")


def documents(*metadata: dict) -> DocumentsRequest:
    return DocumentsRequest(documents=[{"id": f"d{i}", "text": "honey bees", "metadata": m}
                                       for i, m in enumerate(metadata)])


def test_an_upload_of_more_keys_than_the_limit_is_refused_and_nothing_is_queued(service, tmp_path):
    with pytest.raises(ApiError) as err:
        service.indices.add("notes", documents({"a": 1, "b": 2}, {"c": 3, "d": 4}), "local")
    assert (err.value.status, err.value.code, err.value.param) == (422, "max_metadata_keys", "documents")
    assert err.value.message == ("documents: 4 metadata key(s) of their own (a, b, c, d) are 4, over the limit "
                                 "max_metadata_keys=3: each is a column of the index; keep the keys that filters read")
    assert service.store.status_counts() == {} and service.store.index("notes") is None  # no task, no index row
    assert not any((tmp_path / "home").rglob("*.jsonl"))  # no upload file left behind
    request, _, _ = files_request([("notes.md", b"---\na: 1\nb: 2\nc: 3\nd: 4\n---\nHoney bees.\n")], None, False,
                                  None, Limits())
    with pytest.raises(ApiError) as err:
        service.indices.add("notes", request, "local", files=["notes.md"])
    assert (err.value.param, err.value.message.split(":")[0]) == ("files", "files")


def test_the_keys_an_index_holds_count_and_its_own_are_no_new_ones(tmp_path):
    two_document_index(tmp_path / "idx", year=pa.array([2024, 2020]), place=pa.array(["NZ", "FR"]))
    from operators.store import Index

    columns = column_types(Index.open(tmp_path / "idx", verify=False)).names
    request = documents({"year": 2021, "place": "AU", "kind": "note"})
    refuse_many_keys(request.documents, columns, 3, from_files=False)  # year and place are the index's: 3 in all
    with pytest.raises(ApiError) as err:
        refuse_many_keys(documents({"kind": "a", "lang": "en"}).documents, columns, 3, from_files=False)
    assert err.value.message.startswith("documents: 2 metadata key(s) of their own (kind, lang) beside the index's 2 "
                                        "are 4, over the limit max_metadata_keys=3")
