"""Index basics: create/open, write + commit, search, documents, pre-filters, clear errors."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from operators.store import (CommitError, DocnoNotFoundError, Index, IndexCorruptError, IndexExistsError,
                             IndexNotFoundError, IndexSettings, IndexStoreError, ShardDataError, resolve_index)

DIM = 16


@pytest.fixture
def index(tmp_path, sample_docs, make_chunks) -> Index:
    """200 sample docs in 4 shards, random 16-d vectors."""
    idx = Index.create(tmp_path / "idx", IndexSettings(dim=DIM))
    infos = [idx.write_shard(f"s{i}", make_chunks(sample_docs[i * 50:(i + 1) * 50], dim=DIM, seed=i))
             for i in range(4)]
    idx.commit(infos)
    return idx


def test_created_index_reopens_with_its_shards_and_counts(index):
    reopened = Index.open(index.path)
    assert reopened.finished_shards() == {"s0", "s1", "s2", "s3"}
    assert reopened.counts() == {"shards": 4, "chunks": 200, "tombstones": 0, "live_chunks": 200}
    assert len(reopened) == 200 and reopened.generation == 1
    manifest = json.loads((index.path / "manifest.json").read_text())
    assert manifest["format"] == 2 and manifest["merged_shards"] == [] and manifest["settings"]["dim"] == DIM
    shard = manifest["shards"][0]
    assert set(shard["files"]) == {"docs.parquet", "bm25_tf.npz", "bm25_vocab.json", "bm25_doclen.npy",
                                   "dense.faiss"}
    assert all(len(digest) == 64 for digest in shard["files"].values())


def test_bm25_finds_the_document_about_the_query(index, sample_docs):
    bee = next(d for d in sample_docs[:200] if d["title"] == "Bee")
    hits = index.search_bm25(["which insects make honey", "zzzz qqqq"], k=5)
    assert hits[0].docnos[0] == bee["_id"]
    assert list(hits[0].scores) == sorted(hits[0].scores, reverse=True) and len(hits[0]) == 5
    assert len(hits[1]) == 0  # no query word in the index: no results


def test_dense_search_returns_the_stored_vector_first(index, make_chunks, sample_docs):
    vectors = np.stack(make_chunks(sample_docs[50:100], dim=DIM, seed=1).column("vector").to_numpy(
        zero_copy_only=False))
    hits = index.search_dense(vectors[:3].astype(np.float32), k=4)
    assert [h.docnos[0] for h in hits] == [d["_id"] for d in sample_docs[50:53]]
    assert np.allclose([h.scores[0] for h in hits], 1.0, atol=1e-5)


def test_documents_come_back_in_the_requested_order(index, sample_docs):
    wanted = [sample_docs[170]["_id"], sample_docs[3]["_id"], sample_docs[170]["_id"], sample_docs[99]["_id"]]
    table = index.documents(wanted)
    assert table.column("docno").to_pylist() == wanted
    assert table.column("title").to_pylist()[1] == sample_docs[3]["title"]
    assert "vector" not in table.column_names
    with pytest.raises(DocnoNotFoundError, match="nope"):
        index.documents(["nope"])


def test_where_prefilters_bm25_and_dense_without_changing_scores(tmp_path, sample_docs, make_chunks):
    docs = sample_docs[:300]
    idx = Index.create(tmp_path / "f", IndexSettings(dim=DIM))
    for i in range(3):
        part = docs[i * 100:(i + 1) * 100]
        idx.add(make_chunks(part, dim=DIM, seed=i, year=[1990 + (j % 30) for j in range(i * 100, (i + 1) * 100)]),
                shard_id=f"p{i}")
    where = pc.field("year") >= 2010
    allowed = {d["_id"] for j, d in enumerate(docs) if 1990 + j % 30 >= 2010}
    query = "history of the city and its war"
    everything = idx.search_bm25([query], k=300)[0]
    filtered = idx.search_bm25([query], k=10, where=where)[0]
    expected = [(d, s) for d, s in zip(everything.docnos, everything.scores) if d in allowed][:10]
    assert len(filtered) == 10 and set(filtered.docnos) <= allowed
    assert np.array_equal(filtered.scores, [s for _, s in expected])  # global statistics, not the filter's

    q = np.random.default_rng(7).normal(size=(2, DIM)).astype(np.float32)
    all_dense = idx.search_dense(q, k=300)
    for hits, full in zip(idx.search_dense(q, k=10, where=where), all_dense):
        assert hits.docnos == [d for d in full.docnos if d in allowed][:10]
    with pytest.raises(IndexStoreError, match="nosuchcolumn"):
        idx.search_bm25([query], k=3, where=pc.field("nosuchcolumn") == 1)


def test_a_where_one_shard_cannot_evaluate_is_an_error_and_a_column_it_lacks_is_null(tmp_path):
    """Only a column a shard lacks reads as null there; Arrow failing on a shard's values (bytes that are no UTF-8,
    read as text; the index's ``region`` is binary, string and binary's merge) raises with that shard's rows, rather
    than silently matching none of them."""
    idx = Index.create(tmp_path / "u", IndexSettings(dense=False))
    idx.add(pa.table({"docno": ["a", "b"], "doc_id": ["a", "b"], "text": ["honey bee", "honey ant"],
                      "region": ["EU", "US"]}), shard_id="s0")
    idx.add(pa.table({"docno": ["c", "d"], "doc_id": ["c", "d"], "text": ["honey wasp", "honey moth"],
                      "region": pa.array([b"\xff\xfe", b"EU"], pa.binary()), "tag": ["x", "y"]}), shard_id="s1")
    either = (pc.field("tag") == "x") | (pc.field("docno") == "a")  # s0 has no tag: null there, not "no rows"
    assert sorted(idx.search_bm25(["honey"], k=5, where=either)[0].docnos) == ["a", "c"]
    with pytest.raises(IndexStoreError, match="shard 's1'") as err:
        idx.search_bm25(["honey"], k=5, where=pc.field("region").cast(pa.string()) == "EU")
    assert err.value.field == "where" and err.value.rows.column("region").type == pa.binary()


def test_open_missing_or_corrupt_index_says_what_is_wrong(tmp_path, index):
    with pytest.raises(IndexNotFoundError, match=str(tmp_path / "missing")):
        Index.open(tmp_path / "missing")
    (index.path / "manifest.json").write_text("{not json")
    with pytest.raises(IndexCorruptError, match="manifest.json"):
        Index.open(index.path)


def test_corrupted_shard_file_is_detected_when_the_shard_loads(index):
    target = index.path / "shards" / "s2" / "docs.parquet"
    target.write_bytes(target.read_bytes()[:-10] + b"0123456789")
    with pytest.raises(IndexCorruptError, match="s2.*sha256"):
        Index.open(index.path).search_bm25(["music"], k=3)


def test_search_fails_naming_every_damaged_shard_and_check_finds_them(index):
    (index.path / "shards" / "s1" / "dense.faiss").unlink()
    target = index.path / "shards" / "s3" / "bm25_tf.npz"
    target.write_bytes(target.read_bytes()[:-4] + b"oops")
    reader = Index.open(index.path)
    for search in (lambda: reader.search_bm25(["music"], k=3), lambda: reader.search_dense(np.ones((1, DIM)), k=3)):
        with pytest.raises(IndexCorruptError) as raised:
            search()
        message = str(raised.value)
        assert "2 damaged shard(s)" in message and "tessera index info" in message
        assert "s1 (dense.faiss is missing)" in message and "s3 (bm25_tf.npz does not match its sha256" in message
    assert reader.check() == {"s1": "dense.faiss is missing",
                              "s3": "bm25_tf.npz does not match its sha256 in the manifest"}
    assert Index.open(index.path, verify=False).check(checksums=False) == {"s1": "dense.faiss is missing"}


def test_shards_whose_commit_fails_are_removed_and_committed_ones_never(index, sample_docs, make_chunks,
                                                                          monkeypatch):
    shards = index.path / "shards"
    before = sorted(p.name for p in shards.iterdir())
    with pytest.raises(CommitError, match="already live"):
        index.add(make_chunks(sample_docs[10:12], dim=DIM))
    assert sorted(p.name for p in shards.iterdir()) == before
    # compact's new shards are dropped when another commit lands while it rewrites
    write_shard = Index.write_shard

    def write_then_someone_commits(self, shard_id, chunks, **options):
        info = write_shard(self, shard_id, chunks, **options)
        Index.open(self.path).delete(doc_ids=[sample_docs[0]["_id"]])
        return info

    monkeypatch.setattr(Index, "write_shard", write_then_someone_commits)
    with pytest.raises(CommitError, match="changed"):
        index.compact()
    monkeypatch.undo()
    assert sorted(p.name for p in shards.iterdir()) == before and len(Index.open(index.path)) == 199
    # discard never removes a committed shard, nor a folder another write replaced
    index.discard([index.manifest.shard("s0")])
    assert (shards / "s0").is_dir()
    info = index.write_shard("pending", make_chunks(sample_docs[300:302], dim=DIM))
    again = index.write_shard("pending", make_chunks(sample_docs[300:302], dim=DIM))
    index.discard([info])
    assert (shards / "pending").is_dir()
    index.discard([again])
    assert not (shards / "pending").exists()


def test_a_commit_refuses_doc_ids_live_in_the_shards_a_predicate_names(index, sample_docs, make_chunks):
    """An ingested passage's docno is ``ID#0``, an added document's its id: only the doc ids tell that both are one
    document. ``refuse_live_doc_ids`` compares them, in every shard (True) or in those a predicate names."""
    doc = sample_docs[7]  # live in shard s0 (docno = doc id)
    chunk = make_chunks([doc], dim=DIM).set_column(0, "docno", pa.array([doc["_id"] + "#0"]))
    info = index.write_shard("src-00001", chunk)
    with pytest.raises(CommitError, match=rf"\['{doc['_id']}'\] \(1 in all\) are already live") as refused:
        index.commit([info], refuse_live_doc_ids=lambda shard_id: not shard_id.startswith("src-"))
    assert refused.value.field == "doc_id" and index.finished_shards() == {"s0", "s1", "s2", "s3"}
    index.commit([info], refuse_live_doc_ids=lambda shard_id: shard_id != "s0")  # s0 not counted: committed
    assert index.documents([doc["_id"], doc["_id"] + "#0"]).column("doc_id").to_pylist() == [doc["_id"]] * 2
    with pytest.raises(CommitError, match="already live") as added:  # Index.add counts every shard
        index.add(make_chunks([doc], dim=DIM).set_column(0, "docno", pa.array([doc["_id"] + "#1"])))
    assert added.value.field == "doc_id"


def test_folders_no_commit_recorded_are_listed_and_collected_after_a_grace_period(index, sample_docs, make_chunks):
    index.write_shard("crashed", make_chunks(sample_docs[300:302], dim=DIM))  # its writer died before committing
    (index.path / "shards" / ".tmp-x-0123").mkdir()
    assert index.uncommitted() == [".tmp-x-0123", "crashed"]
    assert index.remove_uncommitted(older_than_s=3600) == []  # too recent: its writer may be about to commit
    assert index.remove_uncommitted(older_than_s=0) == [".tmp-x-0123", "crashed"]
    assert index.uncommitted() == [] and index.finished_shards() == {"s0", "s1", "s2", "s3"}


def test_create_refuses_an_index_with_other_settings(index):
    assert Index.create(index.path, IndexSettings(dim=DIM)).generation == 1  # same settings: opened
    with pytest.raises(IndexExistsError) as refused:
        Index.create(index.path, IndexSettings(dim=32, dense_type="hnsw"))
    assert refused.value.message.endswith(f"it has dim: {DIM}, dense_type: \"flat\", and this asks for dim: 32, "
                                          "dense_type: \"hnsw\"; keep its settings, or use another index")


def test_wrong_dim_duplicate_docno_and_missing_column_are_refused(index, sample_docs, make_chunks):
    with pytest.raises(ShardDataError, match="dim 16.*got 8"):
        index.write_shard("bad", make_chunks(sample_docs[300:310], dim=8))
    dup = make_chunks(sample_docs[300:302] * 2, dim=DIM)
    with pytest.raises(ShardDataError, match="duplicate docno.*" + sample_docs[300]["_id"]):
        index.write_shard("bad", dup)
    with pytest.raises(ShardDataError, match="vector"):
        index.write_shard("bad", make_chunks(sample_docs[300:302]))
    with pytest.raises(ShardDataError, match="shard id"):
        index.write_shard("../escape", make_chunks(sample_docs[300:302], dim=DIM))
    # a docno live in another shard is refused at commit
    info = index.write_shard("again", make_chunks(sample_docs[10:12], dim=DIM))
    with pytest.raises(CommitError, match="already live.*upsert") as refused:
        index.commit([info])
    # what is wrong and what to do travel apart (an ingestion gives its own advice), pickled too (from a Ray worker)
    again = pickle.loads(pickle.dumps(refused.value))
    assert "already live" in again.detail and "upsert" not in again.detail and "upsert" in again.advice
    assert str(again) == str(refused.value) and again.field == "docno"
    assert not (index.path / "shards" / "bad").exists()
    assert not [p for p in (index.path / "shards").iterdir() if p.name.startswith(".")]


def test_committed_shards_are_immutable_and_recommitting_is_a_noop(index, sample_docs, make_chunks):
    with pytest.raises(ShardDataError, match="already committed"):
        index.write_shard("s0", make_chunks(sample_docs[300:310], dim=DIM))
    info = Index.open(index.path).manifest.shard("s1")
    before = index.generation
    index.commit([info])
    assert index.counts()["chunks"] == 200 and index.manifest.shard("s1").token == info.token
    assert index.generation == before + 1


def test_an_open_index_follows_one_made_again_at_its_path_with_the_same_generation(index, sample_docs,
                                                                                   make_chunks):
    """A service deletes an index and makes another under its name: a process that kept the old one open (a
    retriever's shared index) must read the new one, though both are at generation 1."""
    import shutil

    assert index.search_bm25(["honey"], k=1)[0].docnos  # the old snapshot is loaded
    shutil.rmtree(index.path)
    again = Index.create(index.path, IndexSettings(dim=DIM))
    again.commit([again.write_shard("new", make_chunks(sample_docs[500:510], dim=DIM))])
    assert again.generation == index.generation == 1
    assert set(index.documents([sample_docs[505]["_id"]]).column("docno").to_pylist()) == {sample_docs[505]["_id"]}
    assert len(index) == 10 and set(index.search_bm25([sample_docs[0]["title"]], k=50)[0].docnos) <= {
        d["_id"] for d in sample_docs[500:510]}


def test_index_pickles_as_a_handle_that_reopens(index):
    clone = pickle.loads(pickle.dumps(index))
    assert clone.path == index.path and clone.finished_shards() == index.finished_shards()


def test_resolve_index_uses_tessera_home_for_bare_names(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    assert resolve_index("scifact") == tmp_path / "home" / "indices" / "scifact"
    assert resolve_index(str(tmp_path)) == tmp_path
    assert resolve_index("./scifact") == Path("scifact").absolute()  # a path, though it does not exist yet
    assert resolve_index("scifact/") == Path("scifact").absolute()
    (tmp_path / "here" / "scifact").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "here")  # a folder of that name where the command runs is not the index
    assert resolve_index("scifact") == tmp_path / "home" / "indices" / "scifact"
    assert resolve_index("./scifact") == tmp_path / "here" / "scifact"
    # absolute: Path("./scifact") is Path("scifact"), which read again would be $TESSERA_HOME's index
    assert resolve_index(resolve_index("./scifact")) == tmp_path / "here" / "scifact"
    # a pathlib.Path is a path, whatever its text: Path("./scifact") meant ./scifact, and was $TESSERA_HOME's index
    assert resolve_index(Path("./scifact")) == resolve_index(Path("scifact")) == tmp_path / "here" / "scifact"


def test_index_info_of_a_dot_slash_path_reads_that_index_and_not_the_homes(tmp_path, monkeypatch, capsys):
    """``tessera index info ./NAME`` reopened the index from its ``path``, which had lost the ``./``, and so read
    (or failed to find) ``$TESSERA_HOME/indices/NAME``."""
    from flows.commands import main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "docs.jsonl").write_text('{"_id": "bees", "title": "Bees", "text": "honey bees make honey"}\n')
    # an ingestion leaves its staging in the index (_ingest/), which index info reads for unfinished ingestions
    assert main(["ingest", "--source", "docs.jsonl", "--index", "./here", "--no-dense", "--executor", "local"]) == 0
    capsys.readouterr()
    assert main(["index", "info", "./here", "--json"]) == 0
    assert '"unfinished_ingestions": []' in capsys.readouterr().out


def test_create_with_bad_settings_names_the_setting_as_a_spec_does(tmp_path):
    """Index.create said pydantic's "bad index settings: Input should be a valid number, unable to parse string as a
    number" where a spec's index_settings and an ingestion's settings say what the value must be and the value given
    (``settings_problem``, shared with ``flows.spec_checks``), naming the setting; nothing is created."""
    from flows.spec_checks import index_settings_problem

    for bad, key, said in [({"k1": "abc"}, "k1", "must be a number (got 'abc')"),
                           ({"dense_typ": "hnsw"}, "dense_typ", "unknown index setting 'dense_typ'; did you mean "
                                                                "'dense_type'?"),
                           ({"dense": False, "bm25": False}, None, "an index needs dense or bm25")]:
        with pytest.raises(IndexStoreError) as refused:
            Index.create(tmp_path / "idx", bad)
        assert (refused.value.field, refused.value.message.startswith(said)) == (key, True), refused.value.message
        spec = index_settings_problem(bad, yaml=False)
        assert (str(spec), spec.key) == (refused.value.message, key)
        assert "Input should" not in refused.value.message and "bad index settings" not in refused.value.message
    assert not (tmp_path / "idx").exists()


def test_settings_reject_unknown_dense_options():
    with pytest.raises(ValueError, match="nlits"):
        IndexSettings(dense_options={"nlits": 4})


def test_doc_store_columns_are_read_without_loading_the_shards(index, sample_docs, make_chunks):
    """columns() and column_names() read the doc stores alone (a listing loads no BM25 or FAISS), with the same
    rows as a searched index: tombstoned chunks left out, a column a shard lacks null there."""
    later = sample_docs[200:210]
    index.commit([index.write_shard("s4", make_chunks(later, dim=DIM, seed=9, year=[2000 + i for i in range(10)]))])
    index.delete(doc_ids=[sample_docs[0]["_id"], later[1]["_id"]])
    fresh = Index.open(index.path)
    generation, table = fresh.columns(["doc_id", "year"])
    assert fresh._loaded == {}  # nothing but the doc stores was read
    assert generation == fresh.generation and table.num_rows == 208
    assert table.column("doc_id").to_pylist()[:2] == [sample_docs[1]["_id"], sample_docs[2]["_id"]]
    assert table.column("year").to_pylist()[-9:] == [2000] + list(range(2002, 2010))
    assert table.column("year").null_count == 199
    assert fresh.column_names()[-1] == "year" and fresh._loaded == {}

    searched = Index.open(index.path)
    searched.search_bm25(["honey"], k=1)  # loads every shard
    assert searched._loaded and searched.columns(["doc_id", "year"])[1].equals(table)
    assert searched.column_names() == fresh.column_names()


def test_a_passage_id_another_document_has_is_refused_naming_both(tmp_path):
    """A document added with the id 'hh#0', then a document 'hh' whose first passage is 'hh#0': the refusal said
    'hh' was live and to replace it, which --replace could not (it replaces by document id, and 'hh' was not live)."""
    index = Index.create(tmp_path / "idx", IndexSettings(dense=False))
    index.add(pa.table({"docno": ["hh#0"], "doc_id": ["hh#0"], "text": ["added with a passage's id"]}))
    with pytest.raises(CommitError, match=r"passage id\(s\) taken by other documents .*'hh#0' of document 'hh' is "
                                          r"document 'hh#0'") as refused:
        index.add(pa.table({"docno": ["hh#0"], "doc_id": ["hh"], "text": ["the first passage of hh"]}))
    assert refused.value.field == "id" and "give these documents ids no other document" in str(refused.value)
    with pytest.raises(CommitError, match="already live"):  # the same document again: the refusal --replace lifts
        index.add(pa.table({"docno": ["hh#0"], "doc_id": ["hh#0"], "text": ["again"]}))
    assert len(index) == 1
