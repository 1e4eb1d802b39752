"""Dense shards: every FAISS type builds and finds neighbours; a shard too small to train says so."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc
import pytest

from operators.store import Index, IndexSettings


RECALL = {"flat": 1.0, "hnsw": 0.9, "hnsw_sq8": 0.85, "sq8": 0.9, "ivf": 0.8, "ivfpq": 0.5}


@pytest.mark.integration  # real MiniLM vectors
@pytest.mark.parametrize("dense_type", list(RECALL))
def test_every_dense_type_builds_and_searches_real_minilm_vectors(tmp_path, sample_docs, make_chunks,
                                                                   minilm_title_vectors, dense_type):
    base, queries = minilm_title_vectors[:900], minilm_title_vectors[900:]
    index = Index.create(tmp_path / dense_type, IndexSettings(dense=True, bm25=False, dense_type=dense_type))
    index.add(make_chunks(sample_docs[:900], vectors=base, part=[i % 3 for i in range(900)]), shard_id="big")
    entry = index.manifest.shard("big").dense
    assert entry.type == dense_type and entry.fallback is None and entry.factory != "Flat" or dense_type == "flat"
    truth = np.argsort(-(queries @ base.T), axis=1)[:, :10]
    ids = [d["_id"] for d in sample_docs[:900]]
    hits = index.search_dense(queries, k=10)
    recall = np.mean([len(set(h.docnos) & {ids[i] for i in t}) / 10 for h, t in zip(hits, truth)])
    assert recall >= RECALL[dense_type], recall
    # Pre-filters hold for every type.
    for h in index.search_dense(queries[:20], k=10, where=pc.field("part") == 1):
        assert h.docnos and all(ids.index(d) % 3 == 1 for d in h.docnos)


@pytest.mark.integration  # real MiniLM vectors
@pytest.mark.parametrize("dense_type", list(RECALL))
def test_a_filter_few_rows_pass_still_gives_k_results_on_every_type(tmp_path, sample_docs, make_chunks,
                                                                   minilm_title_vectors, dense_type, monkeypatch):
    """HNSW's walk and IVF's probed lists reach few of 12 allowed rows of 900: a query came back with 1 of its 10
    results (dense and hybrid pre-filtering, documented to give k results however rare the matches)."""
    base, queries = minilm_title_vectors[:900], minilm_title_vectors[900:]
    rare = np.zeros(900, bool)
    rare[np.random.default_rng(5).choice(900, 12, replace=False)] = True
    index = Index.create(tmp_path / dense_type, IndexSettings(dense=True, bm25=False, dense_type=dense_type))
    index.add(make_chunks(sample_docs[:900], vectors=base, rare=rare.tolist()), shard_id="big")
    ids = np.asarray([d["_id"] for d in sample_docs[:900]])
    truth = ids[rare][np.argsort(-(queries @ base[rare].T), axis=1)[:, :10]]
    hits = index.search_dense(queries, k=10, where=pc.field("rare"))
    assert [len(h.docnos) for h in hits] == [10] * len(queries)
    overlap = np.mean([len(set(h.docnos) & set(t)) / 10 for h, t in zip(hits, truth)])
    assert overlap >= (1.0 if dense_type in ("flat", "hnsw", "ivf") else 0.9), overlap  # exact vectors: exact
    from operators.store import dense

    monkeypatch.setattr(dense, "EXACT_UP_TO", 0)  # a filter many rows pass: the walk first, a short query again
    assert [len(h.docnos) for h in index.search_dense(queries, k=10, where=pc.field("rare"))] == [10] * len(queries)


def test_a_shard_too_small_to_train_falls_back_to_flat_and_says_so(tmp_path, sample_docs, make_chunks):
    index = Index.create(tmp_path / "small", IndexSettings(dim=16, dense_type="ivfpq", bm25=False))
    index.add(make_chunks(sample_docs[:100], dim=16), shard_id="tiny")
    entry = index.manifest.shard("tiny").dense
    assert entry.factory == "Flat" and "100 vectors cannot train IVF" in entry.fallback
    vec = np.asarray(make_chunks(sample_docs[:100], dim=16).column("vector")[7].as_py(), dtype=np.float32)
    assert index.search_dense(vec[None], k=1)[0].docnos == [sample_docs[7]["_id"]]


def test_sq8_takes_each_dimensions_range_from_every_vector_not_the_training_sample():
    """IVF,SQ8 trained on the IVF sample (50 vectors a list): a vector beyond the sample's range in a dimension was
    clipped (a compacted shard of 60 SciFact vectors scored one 0.01 off and dropped it two ranks; here 0.41)."""
    import faiss

    from operators.store.dense import build

    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((60, 64)).astype("float32")
    vectors[:, 0] *= np.where(rng.random(60) < 0.1, 4.0, 1.0)  # a few vectors far out in one dimension
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index, info = build(vectors, IndexSettings(dim=64, dense_type="sq8"))
    assert info.factory == "IVF1,SQ8"  # 60 vectors: more than the 50 its one list's sample holds
    faiss.extract_index_ivf(index).nprobe = 1
    scores, rows = index.search(vectors, 5)
    exact = (vectors[:, None, :] * vectors[rows]).sum(-1)
    assert float(np.abs(scores - exact).max()) < 0.01
