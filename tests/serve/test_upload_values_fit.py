"""An upload whose metadata column merges with the index's to a type that cannot hold every value fails its task
with a message naming the column, both types and the value, and the index keeps what it had: searches over it
still answer 200 (they were a 500, Arrow's "Integer value ... not in range", once such an upload was committed).
An index that took such values before commits checked them answers its searches and its document listing with a
409 ``index_type_conflict`` naming the column and the repair, not a 500.

Real uploads accepted by ``Service`` (real SQLite task store), ingested by the task's own code (``run_ingest``) with
MiniLM in this process; the task, the searches and the listing read over real HTTP (uvicorn on 127.0.0.1)."""

from __future__ import annotations

import pyarrow as pa
import pytest
import requests

from serve.tasks.ingest_task import run_ingest
from tests.serve.conftest import api_on_localhost, upload

pytestmark = pytest.mark.integration  # MiniLM loads in this process

NOT_A_DOUBLE = 2 ** 53 + 1  # a JSON integer (int64) that no double holds exactly


def search(base: str, index: str) -> requests.Response:
    return requests.post(f"{base}/v1/search", json={"flow": {"steps": {"b": {"op": "retrieve.bm25",
                                                                             "params": {"k": 10}}}},
                                                     "query": "bird", "index": index}, timeout=60)


def test_an_upload_whose_values_the_merged_type_cannot_hold_fails_and_the_index_keeps_answering(upload_service):
    first, job = upload(upload_service, "birds", "local", [
        {"id": "kakapo", "text": "the kakapo is a bird", "metadata": {"count": NOT_A_DOUBLE}},
        {"id": "kea", "text": "the kea is a bird", "metadata": {"count": 3}}])
    run_ingest(upload_service.store, first, job)
    second, job = upload(upload_service, "birds", "local", [
        {"id": "takahe", "text": "the takahe is a bird", "metadata": {"count": 0.5}}])
    run_ingest(upload_service.store, second, job)
    with api_on_localhost() as base:
        done = requests.get(f"{base}/task/progress/{first}", timeout=30).json()
        refused = requests.get(f"{base}/task/progress/{second}", timeout=30).json()
        searched = search(base, "birds")
        listed = requests.get(f"{base}/v1/indices/birds/documents", timeout=30)
    assert done["status"] == "finished", done
    assert refused["status"] == "failed", refused
    error = str(refused["error"])
    assert "column 'count' is double, and int64 in shard " in error and "merge to double" in error, error
    assert f"Integer value {NOT_A_DOUBLE} not in range" in error and "nothing was added" in error, error
    assert searched.status_code == 200, searched.text
    assert sorted(h["docno"] for h in searched.json()["results"][0]["hits"]) == ["kakapo#0", "kea#0"]
    assert listed.status_code == 200 and listed.json()["total"] == 2, listed.text


def test_an_index_that_took_such_values_before_is_a_409_naming_the_column(upload_service):
    """Shards committed as before the check: ``count`` int64 in one, a uint64 beyond int64 in the other."""
    from operators.store import Index, IndexSettings
    from operators.store.layout import file_lock, read_manifest, write_manifest

    def chunks(ids: list[str], counts: pa.Array) -> pa.Table:
        return pa.table({"docno": [f"{i}#0" for i in ids], "doc_id": ids, "title": ids,
                         "text": [f"the {i} is a bird" for i in ids], "count": counts})

    index = Index.create(upload_service.indices.folder / "old", IndexSettings(dense=False))
    index.add(chunks(["kakapo", "kea"], pa.array([5, 1], pa.int64())), shard_id="s0")
    info = index.write_shard("s1", chunks(["takahe", "tui"], pa.array([2 ** 64 - 1, 7], pa.uint64())))
    with file_lock(index.path):  # no check: as a commit of an earlier release
        manifest = read_manifest(index.path)
        manifest.shards.append(info)
        manifest.generation += 1
        write_manifest(index.path, manifest)
    with api_on_localhost() as base:
        searched = search(base, "old")
        listed = requests.get(f"{base}/v1/indices/old/documents", timeout=30)
    for answer, param in [(searched, "index"), (listed, "name")]:
        assert answer.status_code == 409, answer.text
        error = answer.json()["error"]
        assert (error["code"], error["param"]) == ("index_type_conflict", param), error
        assert ("column 'count' is uint64 in shard 's1' and int64 in shard 's0'; these merge to int64, which cannot "
                "hold every value of shard 's1' (Integer value 18446744073709551615 not in range") in error["message"]
        assert "index 'old'" in error["message"] and str(index.path) not in error["message"], error["message"]
