"""Changing an index while others read or write it: compaction under readers and concurrent commits,
metadata column types across adds, adds of live doc ids, update of new ids."""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pytest

from flows.commands import main
from operators.store import Index, IndexSettings
from operators.store.errors import CommitConflictError, CommitError, IndexCorruptError, ShardDataError
from operators.store.layout import SHARDS, read_manifest


def _bm25_index(tmp_path, sample_docs, make_chunks, n_shards: int = 3, per: int = 10) -> Index:
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    for i in range(n_shards):
        index.add(make_chunks(sample_docs[i * per:(i + 1) * per]))
    return index


def _write(path, docs) -> str:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return str(path)


def _live_docnos(index: Index) -> list[str]:
    return sorted(index.columns(["docno"])[1].column("docno").to_pylist())


# -- a reader that read the manifest just before a compaction committed ----------------------------------

def test_a_reader_of_the_manifest_before_a_compaction_still_loads_its_shards(tmp_path, sample_docs, make_chunks):
    index = _bm25_index(tmp_path, sample_docs, make_chunks)
    index.delete(doc_ids=[sample_docs[3]["_id"]])
    query = sample_docs[12]["title"]
    want_hits, want_live = index.search_bm25([query], k=5)[0].docnos, _live_docnos(index)
    old = read_manifest(index.path)
    for info in old.shards:  # shards written long ago: their folders' clocks are past the grace period
        os.utime(index.path / SHARDS / info.id, (time.time() - 7200, time.time() - 7200))

    Index.open(index.path).compact()  # another process compacts (and cleans up folders older than an hour)

    reader = Index(index.path, old)  # read the old manifest a moment before the compaction committed
    assert reader.search_bm25([query], k=5)[0].docnos == want_hits
    assert _live_docnos(reader) == want_live
    assert reader._current().manifest.generation == old.generation  # it did read the old shards
    assert set(Index.open(index.path).uncommitted()) == {s.id for s in old.shards}  # left for the grace period


def test_a_reader_whose_shards_were_removed_retries_on_the_new_generation(tmp_path, sample_docs, make_chunks):
    index = _bm25_index(tmp_path, sample_docs, make_chunks)
    query = sample_docs[22]["title"]
    want_hits, want_live = index.search_bm25([query], k=5)[0].docnos, _live_docnos(index)
    old = read_manifest(index.path)
    writer = Index.open(index.path)
    writer.compact()
    assert sorted(writer.remove_uncommitted(older_than_s=0)) == sorted(s.id for s in old.shards)

    for read in ("columns", "search"):  # each on a reader that has not loaded anything yet
        reader = Index(index.path, old)
        if read == "columns":
            assert _live_docnos(reader) == want_live
        else:
            assert reader.search_bm25([query], k=5)[0].docnos == want_hits
        assert reader.manifest.generation == old.generation + 1


def test_a_missing_shard_file_without_a_newer_generation_is_a_corrupt_index(tmp_path, sample_docs, make_chunks):
    index = _bm25_index(tmp_path, sample_docs, make_chunks)
    victim = index.manifest.shards[1].id
    (index.path / SHARDS / victim / "bm25_vocab.json").unlink()
    with pytest.raises(IndexCorruptError, match=f"{victim} \\(bm25_vocab.json is missing\\)"):
        Index.open(index.path, verify=False).search_bm25(["anything"], k=3)
    (index.path / SHARDS / victim / "docs.parquet").unlink()
    with pytest.raises(IndexCorruptError, match=victim):
        Index.open(index.path).columns(["docno"])


# -- compaction while other commits land ---------------------------------------------------------------

def test_compact_redoes_its_merge_when_a_commit_lands_meanwhile(tmp_path, sample_docs, make_chunks, monkeypatch):
    index = _bm25_index(tmp_path, sample_docs, make_chunks)
    gone = [d["_id"] for d in sample_docs[5:7]]
    write_shard = Index.write_shard
    calls = []

    def write_while_others_delete(self, shard_id, chunks, **options):
        calls.append(shard_id)
        if len(calls) <= len(gone):  # the first two attempts each see another process's delete land
            Index.open(index.path).delete(doc_ids=[gone[len(calls) - 1]])
        return write_shard(self, shard_id, chunks, **options)

    monkeypatch.setattr(Index, "write_shard", write_while_others_delete)
    done = Index.open(index.path).compact()
    assert len(calls) == 3  # two attempts lost to the deletes, the third committed
    after = Index.open(index.path)
    assert [s.id for s in after.manifest.shards] == [i.id for i in done.shards]
    assert after.counts() == {"shards": 1, "chunks": 28, "tombstones": 0, "live_chunks": 28}
    # counted on the generation the third attempt merged: the two deletes' tombstones, not the none seen at first
    assert {k: v for k, v in done.as_dict().items() if k != "seconds"} == {
        "shards_before": 3, "shards_after": 1, "chunks": 28, "chunks_before": 30, "tombstones_dropped": 2,
        "generation": after.manifest.generation, "changed": True}
    assert done.seconds >= 0
    assert not set(gone) & set(after.columns(["doc_id"])[1].column("doc_id").to_pylist())
    assert not [name for name in after.uncommitted() if name.startswith("compact-")]  # lost attempts cleaned up


def test_compact_gives_up_after_three_attempts_and_changes_nothing(tmp_path, sample_docs, make_chunks, monkeypatch):
    index = _bm25_index(tmp_path, sample_docs, make_chunks)
    write_shard = Index.write_shard
    busy = iter(sample_docs[:10])

    def write_while_others_delete(self, shard_id, chunks, **options):
        Index.open(index.path).delete(doc_ids=[next(busy)["_id"]])
        return write_shard(self, shard_id, chunks, **options)

    monkeypatch.setattr(Index, "write_shard", write_while_others_delete)
    with pytest.raises(CommitConflictError, match="3 attempts"):
        Index.open(index.path).compact()
    after = Index.open(index.path)
    assert after.counts() == {"shards": 3, "chunks": 30, "tombstones": 3, "live_chunks": 27}
    assert not after.uncommitted()


# -- metadata column types --------------------------------------------------------------------------

def test_an_add_whose_column_type_conflicts_is_refused(tmp_path, sample_docs, capsys):
    idx = str(tmp_path / "idx")
    first = [{**d, "year": 2000 + i, "lang": "en"} for i, d in enumerate(sample_docs[:20])]
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", first), "--no-dense"]) == 0
    other = [{**d, "year": f"y{i}", "lang": 1} for i, d in enumerate(sample_docs[20:30])]
    capsys.readouterr()
    assert main(["index", "add", idx, _write(tmp_path / "b.jsonl", other)]) == 2
    err = capsys.readouterr().err
    assert "column 'year' is string, but it is int64" in err
    index = Index.open(idx)
    assert len(index) == 20 and not index.uncommitted()

    # compatible: floats widen the integers, a column null in every record takes any type
    floats = [{**d, "year": 1999.5, "lang": None} for d in sample_docs[30:35]]
    assert main(["index", "add", idx, _write(tmp_path / "c.jsonl", floats)]) == 0
    index = Index.open(idx)
    hits = index.search_bm25([sample_docs[31]["title"] + " " + sample_docs[1]["title"]], k=40)
    rows = index.documents_of(hits)
    assert rows.schema.field("year").type == pa.float64() and rows.num_rows == len(hits[0])
    assert index.columns(["year"])[1].num_rows == 25
    with pytest.raises(CommitError, match="'year'"):  # the Python API refuses it too, updates included
        index.upsert(pa.table({"docno": ["x"], "doc_id": ["x"], "text": ["t"], "year": ["late"]}))


def test_an_index_with_a_conflicting_type_is_repaired_by_deleting_and_compacting(tmp_path, sample_docs, make_chunks,
                                                                                  commit_unchecked):
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    index.add(make_chunks(sample_docs[:20], year=list(range(20))))
    commit_unchecked(index, "old-add", make_chunks(sample_docs[20:25], year=[f"y{i}" for i in range(5)]))

    index.delete(doc_ids=[d["_id"] for d in sample_docs[20:25]])
    assert len(index.columns(["year"])[1]) == 20  # the emptied shard no longer breaks a listing
    done = index.compact()
    after = Index.open(index.path)
    assert [s.id for s in after.manifest.shards] == [i.id for i in done.shards]
    assert (done.shards_before, done.shards_after, done.chunks, done.tombstones_dropped) == (2, 1, 20, 5)
    assert after.columns(["year"])[1].column("year").to_pylist() == list(range(20))
    hits = after.search_bm25([sample_docs[3]["title"]], k=5)
    assert after.documents_of(hits).schema.field("year").type == pa.int64()


# -- add of a live doc id, update of new ones ---------------------------------------------------------

def test_add_refuses_a_doc_id_live_under_a_chunk_docno(tmp_path, sample_docs, make_chunks, capsys):
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    chunks = make_chunks(sample_docs[:10])  # as `tessera ingest` writes them: docno ID#0, doc_id ID
    index.add(chunks.set_column(0, "docno", pa.array([f"{d['_id']}#0" for d in sample_docs[:10]])))
    edited = [{**sample_docs[0], "text": "EDITED VERSION. " + sample_docs[0]["text"]}]
    capsys.readouterr()
    assert main(["index", "add", str(index.path), _write(tmp_path / "one.jsonl", edited)]) == 2
    err = capsys.readouterr().err
    assert f"document(s) ['{sample_docs[0]['_id']}']" in err and "tessera index update" in err
    after = Index.open(index.path)
    assert len(after) == 10 and not after.uncommitted()
    assert main(["index", "update", str(index.path), _write(tmp_path / "one.jsonl", edited)]) == 0
    assert "replacing 1, adding 0 new document(s); 10 live" in capsys.readouterr().out


def test_update_says_how_many_documents_were_new(tmp_path, sample_docs, capsys):
    idx = str(tmp_path / "idx")
    assert main(["index", "add", idx, _write(tmp_path / "a.jsonl", sample_docs[:10]), "--no-dense"]) == 0
    changed = [{**sample_docs[2], "text": "zebra"}, {"_id": "nosuchdoc", "title": "Ghost", "text": "phantom"},
               {"_id": "another", "title": "New", "text": "fresh"}]
    capsys.readouterr()
    assert main(["index", "update", idx, _write(tmp_path / "b.jsonl", changed)]) == 0
    assert "replacing 1, adding 2 new document(s); 12 live" in capsys.readouterr().out


# -- two writers of one shard id (two ingests of the same source) ------------------------------------------

def test_a_shard_the_other_writer_committed_meanwhile_is_not_replaced(tmp_path, sample_docs, make_chunks,
                                                                      monkeypatch):
    from operators.store import shard as shard_io

    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    theirs, ours = make_chunks(sample_docs[:5]), make_chunks(sample_docs[5:10])
    split_chunks = shard_io.split_chunks

    def the_other_commits_while_this_writes(chunks, settings, shard_id):  # after write_shard's first check
        monkeypatch.setattr(shard_io, "split_chunks", split_chunks)  # the other writer's own write is plain
        other = Index.open(index.path)
        other.commit([other.write_shard(shard_id, theirs)])
        return split_chunks(chunks, settings, shard_id)

    monkeypatch.setattr(shard_io, "split_chunks", the_other_commits_while_this_writes)
    with pytest.raises(ShardDataError, match="already committed"):
        index.write_shard("ingest-00001", ours)
    after = Index.open(index.path)
    assert after.check() == {}  # the committed folder is the one its manifest entry describes
    assert _live_docnos(after) == sorted(theirs.column("docno").to_pylist())
    assert after.uncommitted() == []  # this write's temporary folder is gone


def test_one_text_as_the_ids_to_delete_is_refused_and_deletes_nothing(tmp_path):
    """``delete(doc_ids="ab")`` read the text as the ids "a" and "b": it deleted those and kept the one named."""
    from operators.store.errors import IndexStoreError

    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    index.add(pa.table({"docno": ["a", "b", "ab"], "doc_id": ["a", "b", "ab"],
                        "text": ["apple pie", "banana bread", "apple banana smoothie"]}))
    for kwargs in ({"doc_ids": "ab"}, {"docnos": "ab"}):
        with pytest.raises(CommitError) as err:
            index.delete(**kwargs)
        assert err.value.field == next(iter(kwargs)) and "give ['ab']" in err.value.message
    assert index.counts()["live_chunks"] == 3
    assert index.delete(doc_ids=["ab"]) == 1
    for bad in (0, -1, 2.5, True):  # as the command's --max-chunks: failed inside the merge, or in Arrow's words
        with pytest.raises(IndexStoreError) as err:
            index.compact(max_chunks=bad)
        assert err.value.field == "max_chunks"
    assert index.counts()["live_chunks"] == 2


def test_a_new_shards_id_says_its_time_in_utc_whatever_the_machines_zone(tmp_path, sample_docs, make_chunks,
                                                                          monkeypatch):
    """Under TZ=Pacific/Chatham (UTC+13:45 in December) ``index add`` named its shard ``add-20261208132357-...`` at
    23:38 UTC: the local time, unnamed, 13 hours off the same index's shards written from a machine in UTC."""
    from flows.ingestion.retry import retry_shard_id

    index = Index.create(tmp_path / "idx", IndexSettings(dim=16))
    with monkeypatch.context() as patch:
        patch.setenv("TZ", "Pacific/Chatham")
        time.tzset()
        try:
            before = time.strftime("%Y%m%d%H%M%S", time.gmtime())
            added, retried = index.add(make_chunks(sample_docs[:5], dim=16)).id, retry_shard_id("k1")
            after = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        finally:
            patch.undo()
            time.tzset()
    assert added.startswith("add-") and before <= added.split("-")[1] <= after, (before, added, after)
    assert retried.startswith("retry-k1-") and before <= retried.split("-")[2] <= after, (before, retried, after)
