"""A compaction merges shards into new ids, but what was committed stays committed: ``finished_shards`` keeps the
merged ids (an ingestion skips its finished shards by id), over later compactions and when their documents were
deleted, a merged id cannot be written again, and a commit of one (the other of two ingests of one source) is
``already`` done, not a clash of live docnos, nor (with ``--replace``) a delete of the documents it brought in."""

from __future__ import annotations

import pytest

from operators.store import Index, IndexSettings
from operators.store.errors import ShardDataError


def _ingested(tmp_path, sample_docs, make_chunks, n_shards: int = 3, per: int = 5) -> Index:
    """An index of shards ``src-00000``... committed one by one, as an ingestion commits them."""
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    for i in range(n_shards):
        index.commit([index.write_shard(f"src-{i:05d}", make_chunks(sample_docs[i * per:(i + 1) * per]))])
    return index


def _live_docnos(index: Index) -> list[str]:
    return sorted(index.columns(["docno"])[1].column("docno").to_pylist())


def test_merged_shards_stay_finished_over_compactions_and_deletes(tmp_path, sample_docs, make_chunks):
    index = _ingested(tmp_path, sample_docs, make_chunks)
    index.delete(doc_ids=[d["_id"] for d in sample_docs[5:10]])  # src-00001 has no live chunk: left out of the merge
    first = index.compact()
    ingested = {"src-00000", "src-00001", "src-00002"}
    assert [s.id for s in index.manifest.shards] == [first.shards[0].id]
    assert Index.open(index.path).finished_shards() == ingested | {first.shards[0].id}

    index.commit([index.write_shard("src-00003", make_chunks(sample_docs[15:20]))])
    second = index.compact(max_chunks=8)  # the compacted shard and src-00003 into two new ones
    reopened = Index.open(index.path)
    assert [s.id for s in reopened.manifest.shards] == [s.id for s in second.shards] and len(second.shards) == 2
    assert reopened.finished_shards() == ingested | {"src-00003", first.shards[0].id} | {s.id for s in second.shards}
    assert _live_docnos(reopened) == sorted(d["_id"] for d in sample_docs[:5] + sample_docs[10:20])

    with pytest.raises(ShardDataError, match="already committed"):
        reopened.write_shard("src-00001", make_chunks(sample_docs[5:10]))  # merged ids are never written again


@pytest.mark.parametrize("compacted", [False, True])
def test_a_shard_the_other_ingest_committed_is_already_done(tmp_path, sample_docs, make_chunks, compacted):
    index = _ingested(tmp_path, sample_docs, make_chunks, n_shards=1)
    chunks = make_chunks(sample_docs[5:10])
    ours = index.write_shard("src-00001", chunks)  # written, not committed yet
    other = Index.open(index.path)  # another ingest of the same source writes and commits the same shard
    other.commit([other.write_shard("src-00001", chunks)])
    if compacted:
        Index.open(index.path).compact()  # then a compaction merges it into a new id

    ledger_writes = []  # --replace: the commit replaces the shard's own doc ids, which the other commit brought in
    done = index.commit([ours], replace_doc_ids=index.shard_doc_ids(ours), before_write=lambda: ledger_writes.append(1))
    assert (done.already, done.shards, done.tombstoned, ledger_writes) == (("src-00001",), (), 0, [])
    after = Index.open(index.path)
    assert len(after.manifest.shards) == 1 + (not compacted) and after.check() == {}
    assert _live_docnos(after) == sorted(d["_id"] for d in sample_docs[:10])  # every document once
