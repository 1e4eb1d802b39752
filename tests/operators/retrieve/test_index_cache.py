"""The process-wide index cache (``shared_index``) lets go of a deleted index, and a name deleted and made again
with other documents is searched as the new index, in the same process and by an operator set up before."""

from __future__ import annotations

import gc
import pickle
import shutil
import weakref

import pyarrow as pa
import pytest

from operators.errors import OperatorError
from operators.registry import create
from operators.retrieve import _index_retriever as cache
from operators.store import Index, IndexNotFoundError, IndexSettings


def make(path, docs: dict[str, str]) -> None:
    """An index of ``docs`` (docno -> text) at ``path``, BM25 only."""
    index = Index.create(path, IndexSettings(dense=False))
    index.add(pa.table({"docno": list(docs), "doc_id": list(docs), "text": list(docs.values())}))


def ask(op, text: str) -> list[str]:
    return op(pa.table({"qid": ["q"], "query": [text]})).column("docno").to_pylist()


def test_a_deleted_index_leaves_the_cache_and_is_freed(tmp_path):
    path = tmp_path / "gone"
    make(path, {"bees": "honey bees make honey"})
    op = create("retrieve.bm25", {"index": str(path), "k": 5})
    assert ask(op, "honey") == ["bees"]
    held = weakref.ref(cache.shared_index(path))
    assert str(path.resolve()) in cache._indices

    shutil.rmtree(path)  # what DELETE /v1/indices/{name} does, seen from a process that did not delete it
    with pytest.raises(IndexNotFoundError):
        cache.shared_index(path)
    assert str(path.resolve()) not in cache._indices
    with pytest.raises(OperatorError) as err:  # the set-up operator holds no Index of its own
        ask(op, "honey")
    assert err.value.field == "params.index" and isinstance(err.value.__cause__, IndexNotFoundError)
    # Unreachable, it is freed by its reference count or a collection of the young generations, where it is unless a
    # full collection came meanwhile and froze it alive (tests/conftest.py): then by a full one, unfrozen, which
    # scans every object of this process (half a second and more in a worker that imported torch and litellm).
    gc.collect(1)
    if held() is not None:
        gc.unfreeze()
        gc.collect()
    assert held() is None  # nothing keeps its shards in memory


def test_forget_index_drops_the_entry_of_this_process(tmp_path):
    path = tmp_path / "idx"
    make(path, {"ants": "ants farm aphids"})
    first = cache.shared_index(path)
    assert cache.forget_index(path) and not cache.forget_index(path)
    assert cache.shared_index(path) is not first  # opened anew
    assert not cache.forget_index(path, first)  # only the entry it names


def test_a_name_made_again_serves_its_new_documents(tmp_path):
    path = tmp_path / "notes"
    make(path, {"bees": "honey bees make honey", "wasps": "wasps make paper nests"})
    op = create("retrieve.bm25", {"index": str(path), "k": 5})
    assert ask(op, "honey") == ["bees"]
    old = cache.shared_index(path)
    old_created = old.manifest.created_at

    shutil.rmtree(path)
    make(path, {"ants": "ants farm aphids for honey dew"})  # another index under the same name
    assert ask(op, "honey") == ["ants"]
    assert ask(op, "wasps") == []
    new = cache.shared_index(path)
    assert new is not old and new.manifest.created_at != old_created
    assert create("retrieve.bm25", {"index": str(path), "k": 5}).index is new


def test_a_newer_generation_keeps_the_same_index(tmp_path):
    path = tmp_path / "grows"
    make(path, {"bees": "honey bees make honey"})
    op = create("retrieve.bm25", {"index": str(path), "k": 5})
    first = cache.shared_index(path)
    Index.open(path).add(pa.table({"docno": ["hive"], "doc_id": ["hive"], "text": ["a hive of honey bees"]}))
    assert sorted(ask(op, "honey")) == ["bees", "hive"]
    assert cache.shared_index(path) is first  # followed its manifest, not reopened


def test_a_set_up_operator_still_pickles(tmp_path):
    path = tmp_path / "p"
    make(path, {"bees": "honey bees make honey"})
    op = create("retrieve.bm25", {"index": str(path), "k": 5})
    assert ask(op, "honey") == ["bees"]
    assert ask(pickle.loads(pickle.dumps(op)), "honey") == ["bees"]


def test_a_deleted_index_never_named_again_is_dropped_by_the_next_look(tmp_path, monkeypatch):
    gone, kept = tmp_path / "gone", tmp_path / "kept"
    make(gone, {"bees": "honey bees make honey"})
    make(kept, {"ants": "ants farm aphids"})
    cache.shared_index(gone), cache.shared_index(kept)
    shutil.rmtree(gone)
    monkeypatch.setattr(cache, "SWEEP_EVERY_S", 1e9)
    cache.shared_index(kept)
    assert str(gone.resolve()) in cache._indices  # not looked for yet: a search stats its own manifest only
    monkeypatch.setattr(cache, "SWEEP_EVERY_S", 0.0)
    cache.shared_index(kept)
    assert str(gone.resolve()) not in cache._indices and str(kept.resolve()) in cache._indices


def two_shard_dense(path) -> None:
    """A dense index (4-dim vectors, no model) of two shards, so a search runs them on the shard threads."""
    import numpy as np

    index = Index.create(path, IndexSettings(dim=4, bm25=False))
    for part in ("a", "b"):
        vectors = np.eye(4, dtype=np.float32)[:2] if part == "a" else np.eye(4, dtype=np.float32)[2:]
        index.add(pa.table({"docno": [f"{part}1", f"{part}2"], "doc_id": [f"{part}1", f"{part}2"],
                            "text": ["x", "y"], "vector": pa.array(list(vectors), pa.list_(pa.float32(), 4))}))


def test_many_indices_searched_keep_a_bounded_cache_and_one_set_of_shard_threads(tmp_path):
    """Each index had a pool of threads of its own, never shut down, and the cache kept every index searched: a
    program that searched forty indices held forty pools and forty indices' shards."""
    import threading

    import numpy as np

    paths = [tmp_path / f"idx{i}" for i in range(cache.KEPT_INDICES + 8)]
    for path in paths:
        two_shard_dense(path)
        hits = cache.shared_index(path).search_dense(np.eye(4, dtype=np.float32)[[3]], k=2)
        assert hits[0].docnos[0] == "b2"
    assert len(cache._indices) <= cache.KEPT_INDICES
    assert str(paths[0].resolve()) not in cache._indices and str(paths[-1].resolve()) in cache._indices
    shard_threads = [t for t in threading.enumerate() if t.name.startswith("tessera-index")]
    assert 0 < len(shard_threads) <= 8
    again = cache.shared_index(paths[0])  # let go, opened again where a search names it
    assert again.search_dense(np.eye(4, dtype=np.float32)[[0]], k=1)[0].docnos == ["a1"]
