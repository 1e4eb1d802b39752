"""A search of an index whose shard is damaged on disk (a file cut short, overwritten with garbage or deleted) is a 409
``index_damaged`` naming the index, the shard and what is wrong with it, without the server's paths, while another
index answers as before. It was an opaque 500 (``internal_error``, "the details are in the server log"). Real BM25
indices, a real SQLite task store, real HTTP on 127.0.0.1 (the service's app under uvicorn); nothing runs on Ray."""

from __future__ import annotations

import pytest
import requests

from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import api_on_localhost, two_document_index

pytestmark = pytest.mark.slow

DAMAGE = {
    "cut": ("bm25_tf.npz", lambda path: path.write_bytes(path.read_bytes()[:40]),
            "bm25_tf.npz does not match its sha256 in the manifest"),
    "garbage": ("bm25_vocab.json", lambda path: path.write_text("garbage"),
                "bm25_vocab.json does not match its sha256 in the manifest"),
    "deleted": ("docs.parquet", lambda path: path.unlink(), "docs.parquet is missing"),
}


@pytest.fixture
def base(tmp_path, monkeypatch):
    """The API over a home with the sound index ``news`` and one index per kind of damage: its base URL."""
    home = tmp_path / "home"
    monkeypatch.setenv("TESSERA_HOME", str(home))
    for name, (file, spoil, _) in {"news": (None, None, None), **DAMAGE}.items():
        two_document_index(home / "indices" / name)
        if spoil is not None:
            shard, = (home / "indices" / name / "shards").iterdir()
            spoil(shard / file)
    args = ServiceArgs(default_index=str(home / "indices" / "news"), task_store=f"sqlite:///{tmp_path / 'tasks.db'}")
    Service(resolve(args, environ={}), [], "tessera")
    with api_on_localhost() as url:
        yield url, str(tmp_path)


def search(url: str, index: str) -> requests.Response:
    return requests.post(f"{url}/v1/search", json={"flow": "bm25", "query": "honey bees", "index": index},
                         timeout=60)


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_damaged_index_is_a_409_naming_its_shard_and_the_others_answer(base, kind):
    url, server_path = base
    answer = search(url, kind)
    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert (error["code"], error["param"]) == ("index_damaged", "index"), error
    assert f"index '{kind}' that step 'bm25' searches is damaged" in error["message"], error["message"]
    assert "1 damaged shard(s)" in error["message"] and DAMAGE[kind][2] in error["message"], error["message"]
    assert server_path not in answer.text
    sound = search(url, "news")
    assert sound.status_code == 200 and sound.json()["results"][0]["hits"][0]["docno"] == "bees#0", sound.text


def test_listing_a_damaged_doc_store_is_the_same_409_and_a_sound_one_lists(base):
    url, server_path = base
    for path in ("/v1/indices/deleted/documents", "/v1/indices/deleted/documents/bees"):
        answer = requests.get(url + path, timeout=60)
        assert answer.status_code == 409, (path, answer.text)
        error = answer.json()["error"]
        assert (error["code"], error["param"]) == ("index_damaged", "name"), error
        assert "index 'deleted' is damaged: shard '" in error["message"] and "docs.parquet" in error["message"]
        assert server_path not in answer.text
    listed = requests.get(f"{url}/v1/indices/cut/documents", timeout=60)  # its doc store is sound: only BM25 is cut
    assert listed.status_code == 200 and listed.json()["total"] == 2, listed.text
