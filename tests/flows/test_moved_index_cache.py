"""A step cache keeps its hits when the index is copied, moved or renamed (a ``$TESSERA_HOME`` moved whole, a backup
restored elsewhere): the index retrievers' keys named the index's resolved path, so every search of a moved index
missed, while its rows are the same. A copy that changes since, or another index, still misses. Real indices and a
real step cache on disk."""

from __future__ import annotations

import shutil

from operators.testing import sample_documents
from tests.conftest import bm25_sample_index

QUERIES = ["classical music", "volcanic islands", "honey bees"]


def run(index, cache):
    from flows.api import Flow

    return Flow.load("bm25", index=index).run(QUERIES, cache=cache)


def test_a_home_moved_and_its_index_renamed_keeps_its_cached_searches(tmp_path, monkeypatch):
    old, new = tmp_path / "old-home", tmp_path / "elsewhere" / "home"
    bm25_sample_index(old / "indices" / "papers", 60)
    monkeypatch.setenv("TESSERA_HOME", str(old))
    first = run("papers", True)
    assert first.cache_hit_ratio == 0.0
    shutil.copytree(old, new, symlinks=True)
    (new / "indices" / "papers").rename(new / "indices" / "articles")
    shutil.rmtree(old)
    monkeypatch.setenv("TESSERA_HOME", str(new))
    moved = run("articles", True)  # the cache of the moved home
    assert moved.cache_hit_ratio == 1.0  # 0.0 before: every key named /old-home/indices/papers
    assert moved.table.equals(first.table)
    assert not old.exists()  # nothing written to the old place


def test_a_copy_that_changed_or_another_index_misses(tmp_path):
    from operators.store import Index

    cache = tmp_path / "cache"
    original = bm25_sample_index(tmp_path / "one", 60)
    run(original, cache)
    copy = tmp_path / "two"
    shutil.copytree(original, copy)
    assert run(copy, cache).cache_hit_ratio == 1.0
    Index.open(copy).delete(doc_ids=[sample_documents(60).column("docno")[0].as_py()])
    assert run(copy, cache).cache_hit_ratio == 0.0  # a commit since: another generation
    assert run(original, cache).cache_hit_ratio == 1.0
    other = bm25_sample_index(tmp_path / "three", 60)  # the same documents, written again: other shards
    assert run(other, cache).cache_hit_ratio == 0.0
