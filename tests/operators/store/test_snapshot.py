"""Searches are exact: 4 shards rank like 1, and thousands of random adds, upserts and deletes (and a
compaction) leave an index that scores exactly like a fresh bm25s index and an exact dense search over
the final live corpus."""

from __future__ import annotations

import bm25s
import numpy as np
import pyarrow as pa
import pytest
import Stemmer
from bm25s.tokenization import Tokenizer

from operators.embed.sentence_transformer import vectors_to_arrow
from operators.store import DocnoNotFoundError, Index, IndexSettings

DIM = 24


def _chunks(rng, sample_docs, doc_ids, version):
    """1-3 chunks per doc id, with real text drawn from the sample corpus and random unit vectors."""
    rows = []
    for doc_id in doc_ids:
        for c in range(int(rng.integers(1, 4))):
            src = sample_docs[int(rng.integers(len(sample_docs)))]
            start = int(rng.integers(0, max(1, len(src["text"]) - 200)))
            rows.append({"docno": f"{doc_id}#{c}", "doc_id": doc_id, "title": src["title"],
                         "text": f"{src['text'][start:start + 300]} v{version}"})
    vectors = rng.normal(size=(len(rows), DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    table = pa.Table.from_pylist(rows)
    return table.append_column("vector", vectors_to_arrow(vectors)), dict(zip((r["docno"] for r in rows),
                                                                              zip(rows, vectors)))


def _check(index, live, queries, rng):
    docnos = sorted(live)
    rows = [live[d][0] for d in docnos]
    # BM25: a fresh bm25s index over the live chunks, same tokenizer and parameters.
    tokenizer = Tokenizer(stopwords="en", stemmer=Stemmer.Stemmer("english"))
    fresh = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    fresh.index(tokenizer.tokenize([f"{r['title']} {r['text']}" for r in rows], return_as="tuple",
                                   show_progress=False), show_progress=False)
    for query, hits in zip(queries, index.search_bm25(queries, k=20)):
        ids = tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)[0]
        full = fresh.get_scores(ids) if ids else np.zeros(len(rows))
        expected = np.sort(full[full > 0])[::-1][:20]
        assert len(hits) == len(expected) > 0 or not len(expected)
        assert set(hits.docnos) <= set(live)  # deleted or replaced chunks never come back
        assert np.allclose(hits.scores, expected, rtol=0, atol=1e-6), query
        by_docno = dict(zip(docnos, full))
        assert np.allclose([by_docno[d] for d in hits.docnos], hits.scores, rtol=0, atol=1e-6), query
    # Dense: exact inner-product search over the live vectors.
    matrix = np.stack([live[d][1] for d in docnos])
    q = rng.normal(size=(5, DIM)).astype(np.float32)
    exact = q @ matrix.T
    for row, hits in zip(exact, index.search_dense(q, k=100)):
        top = np.argsort(-row, kind="stable")[:100]
        assert len(top) == 100 and hits.docnos == [docnos[i] for i in top]
        assert np.allclose(hits.scores, row[top], atol=1e-5)


def _same_ranking(a, b):
    """Equal scores, and equal docnos wherever the score is not tied with the cut-off."""
    assert np.array_equal(a.scores, b.scores)
    if len(a):
        last = a.scores[-1]
        above = [[d for d, s in zip(x.docnos, x.scores) if s > last] for x in (a, b)]
        assert above[0] == above[1]


def test_four_shards_rank_exactly_like_one(tmp_path, sample_docs, make_chunks):
    chunks = make_chunks(sample_docs, dim=32, seed=5)
    one = Index.create(tmp_path / "one", IndexSettings(dim=32))
    one.add(chunks, shard_id="all")
    four = Index.create(tmp_path / "four", IndexSettings(dim=32))
    four.commit([four.write_shard(f"s{i}", chunks.slice(i * 250, 250)) for i in range(4)])
    queries = [d["title"] for d in sample_docs[::50]] + ["which insects make honey"]
    pairs = list(zip(one.search_bm25(queries, k=10), four.search_bm25(queries, k=10)))
    for a, b in pairs:
        _same_ranking(a, b)
    assert sum(len(a) for a, _ in pairs) > 100
    vectors = np.random.default_rng(1).normal(size=(20, 32)).astype(np.float32)
    for a, b in zip(one.search_dense(vectors, k=10), four.search_dense(vectors, k=10)):
        assert a.docnos == b.docnos and np.allclose(a.scores, b.scores, atol=1e-6)


@pytest.mark.slow
def test_random_updates_keep_bm25_and_dense_exact(tmp_path, sample_docs):
    rng = np.random.default_rng(42)
    index = Index.create(tmp_path / "idx", IndexSettings(dim=DIM))
    live: dict[str, tuple[dict, np.ndarray]] = {}  # docno -> (row, vector): the truth
    next_doc, ops = 0, 0
    queries = [d["title"] for d in sample_docs[::97]] + ["which insects make honey", "war and peace treaty"]
    for step in range(36):
        doc_ids = sorted({r["doc_id"] for r, _ in live.values()})
        kind = "add" if step < 4 or not doc_ids else rng.choice(["add", "upsert", "delete", "delete_docnos"])
        if kind == "add":
            new = [f"d{next_doc + i}" for i in range(int(rng.integers(20, 80)))]
            next_doc += len(new)
            table, rows = _chunks(rng, sample_docs, new, step)
            index.add(table)
            live.update(rows)
            ops += len(new)
        elif kind == "upsert":
            picked = list(rng.choice(doc_ids, size=min(len(doc_ids), int(rng.integers(10, 60))), replace=False))
            picked += [f"d{next_doc}"]  # upsert also adds a doc id never seen
            next_doc += 1
            table, rows = _chunks(rng, sample_docs, picked, step)
            index.upsert(table)
            live = {d: v for d, v in live.items() if v[0]["doc_id"] not in set(picked)}
            live.update(rows)
            ops += len(picked)
        elif kind == "delete":
            picked = set(rng.choice(doc_ids, size=min(len(doc_ids), int(rng.integers(5, 40))), replace=False))
            assert index.delete(doc_ids=picked) == sum(v[0]["doc_id"] in picked for v in live.values())
            live = {d: v for d, v in live.items() if v[0]["doc_id"] not in picked}
            ops += len(picked)
        else:
            picked = set(rng.choice(sorted(live), size=min(len(live), 15), replace=False))
            index.delete(docnos=picked)
            live = {d: v for d, v in live.items() if d not in picked}
            ops += len(picked)
        if step == 20:
            index.compact()
            assert index.counts()["tombstones"] == 0
        if step in (10, 35):
            _check(Index.open(index.path), live, queries, rng)  # a fresh reader
            _check(index, live, queries, rng)  # the writer's own cached state
    assert ops > 1000 and len(index) == len(live)
    gone = next(f"d{i}#0" for i in range(next_doc) if f"d{i}#0" not in live)
    with pytest.raises(DocnoNotFoundError):
        index.documents([gone])
