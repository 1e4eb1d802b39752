"""``Index.compact`` reports each shard as it merges it: in manifest order, after the new shards that shard filled
are written, ending at the total once every new shard is. Shards are read one at a time, so the new shards' doc
stores must still agree on each column's type (an int column widened to the float another shard has) and carry
every live chunk's own vector. A dense index of the sample corpus (random unit vectors), five adds, some deletes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from operators.store import Index, IndexSettings
from operators.store import dense

DIM = 8
ADDS = 5
PER_ADD = 9
MAX_CHUNKS = 12  # new shards fill in the middle of the old ones


def test_the_callback_sees_every_shard_in_order_after_its_rows_are_written(tmp_path, sample_docs, make_chunks):
    index = Index.create(tmp_path / "idx", IndexSettings(dim=DIM))
    vectors = {}
    for n in range(ADDS):
        docs = sample_docs[n * PER_ADD:(n + 1) * PER_ADD]
        year = [2000 + i + 0.5 for i in range(PER_ADD)] if n == 3 else [2000 + i for i in range(PER_ADD)]
        chunks = make_chunks(docs, dim=DIM, seed=n, year=year)
        index.add(chunks)
        vectors.update(zip(chunks.column("docno").to_pylist(), np.asarray(chunks.column("vector").to_pylist())))
    gone = [d["_id"] for d in sample_docs[2:5]] + [d["_id"] for d in sample_docs[PER_ADD:2 * PER_ADD]]  # one all
    index.delete(doc_ids=gone)
    before = index.manifest
    live = [d for d in index.columns(["docno"])[1].column("docno").to_pylist()]

    events, written = [], []

    def on_progress(event) -> None:
        events.append(event)
        written.append(len([n for n in index.uncommitted() if n.startswith("compact-")]))

    done = index.compact(max_chunks=MAX_CHUNKS, on_progress=on_progress)

    assert [e.shard for e in events] == [s.id for s in before.shards]  # every shard, in order, once
    assert [e.shards for e in events] == list(range(1, ADDS + 1))
    assert {(e.shards_total, e.chunks_total, e.attempt) for e in events} == {(ADDS, ADDS * PER_ADD, 1)}
    assert events[-1].chunks == len(live) == done.chunks
    # reported once the new shards it filled were written; at the last shard, every new shard is
    assert written == [e.chunks // MAX_CHUNKS for e in events[:-1]] + [done.shards_after]
    assert done.shards_after == -(-len(live) // MAX_CHUNKS)

    after = Index.open(index.path)
    assert after.columns(["docno"])[1].column("docno").to_pylist() == live  # the same chunks, in the same order
    for info in after.manifest.shards:
        folder = after.path / "shards" / info.id
        docs = pq.read_table(folder / "docs.parquet")
        assert docs.schema.field("year").type == pa.float64()  # also in a new shard of int rows only
        expected = np.stack([vectors[d] for d in docs.column("docno").to_pylist()])
        assert np.allclose(dense.vectors(dense.load(folder), folder), expected)
