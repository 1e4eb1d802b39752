"""Precomputed ColBERT document tokens: round trip, atomic writes, building for an index, staleness, ingest."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from operators.store.token_store import (TokenStore, TokenStoreError, build_token_store, find_token_store,
                                         write_token_store)
from operators.tables import document_text

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def colbert_model(tmp_path_factory):
    """A real (untrained) ColBERT checkpoint: MiniLM + a seeded 32-wide projection, 32-token documents."""
    from operators.models.colbert import new_colbert

    model = new_colbert("minilm", dim=32, seed=3, device="cpu", doc_maxlen=32)
    return str(model.save(tmp_path_factory.mktemp("colbert") / "model"))


def _matrices(seed: int, lengths: list[int], dim: int = 8) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, dim)).astype(np.float32) for n in lengths]


def test_round_trip_is_memory_mapped_float16(tmp_path):
    matrices = _matrices(0, [3, 0, 5, 1])
    docnos = ["a", "b", "c", "d"]
    store = write_token_store(tmp_path / "store", zip(docnos, matrices), dim=8, meta={"note": "x"})
    assert isinstance(store.tokens, np.memmap) and store.tokens.dtype == np.float16
    assert len(store) == 4 and store.meta["n_tokens"] == 9 and store.meta["note"] == "x"
    got = store.get(["c", "missing", "a", "b"])
    assert got[1] is None
    for matrix, expected in zip([got[0], got[2], got[3]], [matrices[2], matrices[0], matrices[1]]):
        assert matrix.shape == expected.shape
        np.testing.assert_array_equal(matrix, expected.astype(np.float16))
    assert [p.name for p in tmp_path.iterdir()] == ["store"]  # no temporary folder left


def test_a_failed_write_leaves_the_previous_store(tmp_path):
    folder = tmp_path / "store"
    write_token_store(folder, zip(["a"], _matrices(1, [2])), dim=8)

    def failing():
        yield "x", _matrices(2, [4])[0]
        raise RuntimeError("encoder died")

    with pytest.raises(RuntimeError, match="encoder died"):
        write_token_store(folder, failing(), dim=8)
    with pytest.raises(TokenStoreError) as err:  # a matrix of the wrong width names the field
        write_token_store(folder, [("y", np.zeros((2, 5), np.float32))], dim=8)
    assert err.value.field == "tokens"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    store = TokenStore(folder)
    assert store.docnos == ["a"] and store.get(["x"]) == [None]
    with pytest.raises(TokenStoreError, match="no ColBERT token store"):
        TokenStore(tmp_path / "nothing")


@pytest.mark.integration
def test_build_for_an_index_follows_adds_deletes_and_upserts(tmp_path, sample_docs, make_chunks, colbert_model):
    from operators.models.colbert import load_colbert
    from operators.store import Index

    model = load_colbert(colbert_model, device="cpu")
    docs = sample_docs[:10]
    index = Index.create(tmp_path / "idx", {"dense": False})
    index.add(make_chunks(docs))
    store = build_token_store(index, colbert_model)
    assert store.folder.parent == index.path / "colbert" and len(store) == 10
    assert store.meta["encoded"] == 10 and store.meta["doc_maxlen"] == 32
    expected = model.encode_documents([document_text(d["text"], d["title"]) for d in docs[:3]])
    for got, want in zip(store.get([d["_id"] for d in docs[:3]]), expected):
        np.testing.assert_allclose(got.astype(np.float32), want, atol=2e-3)
        assert len(got) <= 32
    assert build_token_store(index, colbert_model).meta["created_at"] == store.meta["created_at"]  # up to date

    index.add(make_chunks(sample_docs[10:12]))
    changed = {**docs[0], "text": "Honey bees live in colonies and make honey."}
    index.upsert(make_chunks([changed]))
    index.delete(doc_ids=[docs[1]["_id"]])
    old = find_token_store(index.path, model, doc_maxlen=32)
    assert old.get([docs[0]["_id"], docs[1]["_id"], sample_docs[10]["_id"], docs[2]["_id"]])[:3] == [None] * 3
    assert old.get([docs[2]["_id"]])[0] is not None

    again = build_token_store(index, colbert_model)
    assert len(again) == 11 and again.meta["encoded"] == 3 and again.meta["reused"] == 8
    fresh = model.encode_documents([document_text(changed["text"], changed["title"])])[0]
    np.testing.assert_allclose(again.get([docs[0]["_id"]])[0].astype(np.float32), fresh, atol=2e-3)
    assert again.get([docs[1]["_id"]]) == [None]
    assert find_token_store(index.path, model, doc_maxlen=16) is None  # another encoding: another store
    assert [p.name for p in (index.path / "colbert").iterdir()] == [again.folder.name]


@pytest.mark.integration
def test_ingest_colbert_option_builds_the_store(tmp_path, sample_docs, colbert_model, capsys):
    from flows.commands.ingest import main as ingest_main

    source = tmp_path / "corpus.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in sample_docs[:8]), encoding="utf-8")
    code = ingest_main(["--source", str(source), "--index", str(tmp_path / "idx"), "--no-dense", "--no-chunk",
                        "--executor", "local", "--colbert", colbert_model, "--json", "--quiet"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    store = TokenStore(report["colbert_store"])
    assert len(store) == 8 and store.meta["model"] == colbert_model
    assert sorted(store.docnos) == sorted(d["_id"] for d in sample_docs[:8])
    table = pa.table({"docno": store.docnos})
    assert all(m is not None and m.shape[1] == 32 for m in store.get(table.column("docno").to_pylist()))


@pytest.mark.integration
def test_build_progress_moves_per_encoder_batch_not_per_shard(tmp_path, sample_docs, make_chunks, colbert_model,
                                                              monkeypatch):
    from operators.store import Index, token_store

    index = Index.create(tmp_path / "idx", {"dense": False})
    index.add(make_chunks(sample_docs[:20]))  # one shard
    updates = []

    class Recorder:
        def update(self, n):
            updates.append(n)

        def close(self):
            pass

    monkeypatch.setattr(token_store, "_bar", lambda total, progress: Recorder())
    build_token_store(index, colbert_model, batch_size=8)
    assert updates == [8, 8, 4]


def test_ingest_checks_the_colbert_model_before_it_creates_anything(tmp_path, sample_docs, monkeypatch, capsys):
    from flows.commands.ingest import main as ingest_main

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    source = tmp_path / "corpus.jsonl"
    source.write_text("".join(json.dumps(d) + "\n" for d in sample_docs[:8]), encoding="utf-8")
    code = ingest_main(["--source", str(source), "--index", str(tmp_path / "idx"), "--no-dense", "--no-chunk",
                        "--executor", "local", "--colbert", "tessera-colbert", "--quiet"])
    assert code == 2
    assert "'tessera-colbert' for flow ingest, step colbert (--colbert)" in capsys.readouterr().err
    assert not (tmp_path / "idx").exists()


def test_a_store_of_a_later_format_is_refused_naming_it_and_kept(tmp_path):
    """Read as this release's, a later layout's tokens would score candidates wrongly without a word."""
    store = write_token_store(tmp_path / "store", zip(["a", "b"], _matrices(1, [2, 3])), dim=8, meta={"key": "k"})
    meta_file = store.folder / "meta.json"
    meta = json.loads(meta_file.read_text())
    assert meta["format"] == "tessera-colbert-tokens/1"
    meta_file.write_text(json.dumps({**meta, "format": "tessera-colbert-tokens/2"}))
    before = {p.name: p.read_bytes() for p in store.folder.iterdir()}
    with pytest.raises(TokenStoreError, match=r"has format 'tessera-colbert-tokens/2', which a later Tessera wrote "
                                              r"\(this one reads 'tessera-colbert-tokens/1'\).*--colbert MODEL"):
        TokenStore(store.folder)
    assert {p.name: p.read_bytes() for p in store.folder.iterdir()} == before


@pytest.mark.integration
def test_a_rewritten_candidate_text_is_encoded_from_the_row_and_an_old_store_gains_digests(tmp_path, sample_docs,
                                                                                           make_chunks, colbert_model):
    """A step before the reranker that stemmed or cut the text: the stored tokens are of the indexed text, so the
    reranker encodes the row's own; a store written before digests were kept gains them on a rebuild, unencoded."""
    import pyarrow.parquet as pq

    from operators.rerank.colbert import ColbertReranker

    docs = sample_docs[:8]
    index = _text_index(tmp_path, docs, make_chunks)
    store = build_token_store(index, colbert_model)
    indexed = [document_text(d["text"], d["title"]) for d in docs]
    ids = [d["_id"] for d in docs]
    assert all(m is not None for m in store.get(ids, texts=indexed))
    assert [m is None for m in store.get(ids[:2], texts=[indexed[0], "a text no one indexed"])] == [False, True]

    rows = pa.table({"qid": ["q"] * 8, "query": ["which insects make honey"] * 8, "docno": ids,
                     "title": [d["title"] for d in docs], "text": [d["text"] for d in docs],
                     "rank": pa.array(range(1, 9), pa.int32())})
    rewritten = rows.set_column(4, "text", pa.array(["bees make honey in hives"] * 3 + rows["text"].to_pylist()[3:]))
    stored = ColbertReranker({"model": colbert_model, "device": "cpu", "index": str(index.path)}, step_id="cb")
    fresh = ColbertReranker({"model": colbert_model, "device": "cpu", "token_store": None}, step_id="cb")
    a, b = stored(rewritten), fresh(rewritten)
    assert stored.counts == {"stored": 5, "encoded": 3}  # it was 8 stored, the three scored by their indexed text
    by_docno = dict(zip(b["docno"].to_pylist(), b["score_cb"].to_pylist()))
    for docno, score in zip(a["docno"].to_pylist(), a["score_cb"].to_pylist()):
        assert score == pytest.approx(by_docno[docno], abs=5e-3)

    docs_file = store.folder / "docs.parquet"  # a store as Tessera wrote it before digests were kept
    pq.write_table(pq.read_table(docs_file).drop_columns(["digest"]), docs_file)
    old = find_token_store(index.path, stored.model, doc_maxlen=32)
    assert old.digests is None and old.get(ids[:1], texts=["a text no one indexed"])[0] is not None  # as before
    again = build_token_store(index, colbert_model)
    assert again.meta["encoded"] == 0 and again.meta["reused"] == 8 and again.get(ids[:1], texts=["other"]) == [None]


def _text_index(tmp_path, docs, make_chunks):
    from operators.store import Index

    index = Index.create(tmp_path / "idx", {"dense": False})
    index.add(make_chunks(docs))
    return index
