"""``Index.compact`` with a shard far larger than ``max_chunks``: it is cut into full parts in order, its last part
topped up by the next shard's rows, and every part keeps each chunk's own vector (the parts are cut by offset, not
by re-joining what is left of the shard after each part). A dense index of the sample corpus (random unit vectors):
a small shard, a shard of 600 with a few deletes, a small shard."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from operators.store import Index, IndexSettings
from operators.store import dense

DIM = 8
MAX_CHUNKS = 16
SIZES = (5, 600, 9)  # the big shard fills 37 parts and leaves rows for the last shard's part


@pytest.mark.parametrize("dense_index", [True, False], ids=["dense", "bm25-only"])
def test_a_big_shard_is_cut_into_full_parts_in_order_with_their_vectors(tmp_path, sample_docs, make_chunks,
                                                                       dense_index):
    index = Index.create(tmp_path / "idx", IndexSettings(dim=DIM) if dense_index else IndexSettings(dense=False))
    vectors, start = {}, 0
    for seed, size in enumerate(SIZES):
        chunks = make_chunks(sample_docs[start:start + size], dim=DIM if dense_index else None, seed=seed)
        index.add(chunks)
        if dense_index:
            vectors.update(zip(chunks.column("docno").to_pylist(), np.asarray(chunks.column("vector").to_pylist())))
        start += size
    big = [d["_id"] for d in sample_docs[SIZES[0]:SIZES[0] + SIZES[1]]]
    index.delete(doc_ids=big[:3] + big[100:117] + big[-2:])  # the cuts fall elsewhere than every 16th row
    live = index.columns(["docno"])[1].column("docno").to_pylist()

    done = index.compact(max_chunks=MAX_CHUNKS)

    after = Index.open(index.path)
    parts = [pq.read_table(after.path / "shards" / info.id / "docs.parquet").column("docno").to_pylist()
             for info in after.manifest.shards]
    assert parts == [live[i:i + MAX_CHUNKS] for i in range(0, len(live), MAX_CHUNKS)]  # full parts, in order
    assert [info.id for info in after.manifest.shards] == [info.id for info in done.shards]
    assert done.chunks == len(live) == sum(SIZES) - 22
    if dense_index:
        for info, docnos in zip(after.manifest.shards, parts):
            folder = after.path / "shards" / info.id
            assert np.allclose(dense.vectors(dense.load(folder), folder), np.stack([vectors[d] for d in docnos]))
    hit = after.search_bm25([sample_docs[SIZES[0] + 300]["title"]], k=3)[0].docnos
    assert sample_docs[SIZES[0] + 300]["_id"] in hit  # the new shards are searchable
