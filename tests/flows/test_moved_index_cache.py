"""A step cache keeps its hits when the index is copied, moved or renamed (a ``$TESSERA_HOME`` moved whole, a backup
restored elsewhere): the index retrievers' keys named the index's resolved path, so every search of a moved index
missed, while its rows are the same. A copy that changes since, or another index, still misses. Real indices and a
real step cache on disk."""

from __future__ import annotations

import shutil

from operators.testing import sample_documents

QUERIES = ["classical music", "volcanic islands", "honey bees"]


def make_index(path):
    from operators.store import Index, IndexSettings

    index = Index.create(path, IndexSettings(dense=False))
    docs = sample_documents(60)
    index.commit([index.write_shard("a", docs.append_column("doc_id", docs.column("docno")))])
    return path


def run(index, cache):
    from flows.api import Flow

    return Flow.load("bm25", index=index).run(QUERIES, cache=cache)


def test_a_home_moved_and_its_index_renamed_keeps_its_cached_searches(tmp_path, monkeypatch):
    old, new = tmp_path / "old-home", tmp_path / "elsewhere" / "home"
    make_index(old / "indices" / "papers")
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
    original = make_index(tmp_path / "one")
    run(original, cache)
    copy = tmp_path / "two"
    shutil.copytree(original, copy)
    assert run(copy, cache).cache_hit_ratio == 1.0
    Index.open(copy).delete(doc_ids=[sample_documents(60).column("docno")[0].as_py()])
    assert run(copy, cache).cache_hit_ratio == 0.0  # a commit since: another generation
    assert run(original, cache).cache_hit_ratio == 1.0
    other = make_index(tmp_path / "three")  # the same documents, written again: other shards
    assert run(other, cache).cache_hit_ratio == 0.0
