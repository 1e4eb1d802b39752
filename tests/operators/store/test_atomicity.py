"""Crashes and races: nothing half-written becomes visible, and concurrent commits all survive."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from operators.store import Index, IndexSettings, ShardDataError

REPO = Path(__file__).resolve().parents[3]
DIM = 8


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def _chunks_code(path: Path, lo: int, hi: int, tag: str) -> str:
    return f"""
        import json, os
        import numpy as np, pyarrow as pa
        from operators.embed.sentence_transformer import vectors_to_arrow
        from operators.store import Index
        docs = [json.loads(l) for l in open("data/sample/corpus.jsonl")][{lo}:{hi}]
        v = np.random.default_rng(0).normal(size=(len(docs), {DIM})).astype("float32")
        chunks = pa.table({{"docno": [d["_id"] for d in docs], "doc_id": [d["_id"] for d in docs],
                           "title": [d["title"] for d in docs], "text": [d["text"] + " {tag}" for d in docs],
                           "vector": vectors_to_arrow(v)}})
        index = Index.open({str(path)!r})
    """


@pytest.mark.integration
def test_crash_between_write_shard_and_commit_leaves_nothing_visible(tmp_path, sample_docs, make_chunks):
    index = Index.create(tmp_path / "idx", IndexSettings(dim=DIM))
    index.add(make_chunks(sample_docs[:20], dim=DIM), shard_id="base")
    crashed = _run(_chunks_code(index.path, 20, 40, "crashed") + """
        index.write_shard("next", chunks)
        os._exit(1)  # killed before commit
    """)
    assert crashed.returncode == 1, crashed.stderr
    assert (index.path / "shards" / "next" / "shard.json").exists()  # written, yet not part of the index
    reopened = Index.open(index.path)
    assert reopened.finished_shards() == {"base"} and len(reopened) == 20
    assert reopened.search_bm25(["crashed"], k=5)[0].docnos == []
    # The same shard id can be written again, and then committed.
    info = reopened.write_shard("next", make_chunks(sample_docs[20:40], dim=DIM, seed=3))
    reopened.commit([info])
    assert len(Index.open(index.path)) == 40
    assert reopened.search_bm25([sample_docs[25]["title"]], k=1)[0].docnos == [sample_docs[25]["_id"]]


@pytest.mark.process
def test_failed_upsert_keeps_the_old_version_searchable(tmp_path, sample_docs, make_chunks):
    index = Index.create(tmp_path / "idx", IndexSettings(dim=DIM))
    index.add(make_chunks(sample_docs[:30], dim=DIM))
    old = index.documents([sample_docs[5]["_id"]]).column("text").to_pylist()
    # Building the new version fails (vectors of the wrong dim): nothing changes.
    with pytest.raises(ShardDataError, match="dim"):
        index.upsert(make_chunks(sample_docs[5:6], dim=DIM * 2))
    # The process dies after writing the new version, before its commit: nothing changes either.
    died = _run(_chunks_code(index.path, 5, 6, "brandnewversion") + """
        index.write_shard("upsert-died", chunks)
        os._exit(1)
    """)
    assert died.returncode == 1, died.stderr
    for reader in (index, Index.open(index.path)):
        assert reader.documents([sample_docs[5]["_id"]]).column("text").to_pylist() == old
        assert reader.search_bm25([sample_docs[5]["title"]], k=1)[0].docnos == [sample_docs[5]["_id"]]
        assert reader.search_bm25(["brandnewversion"], k=1)[0].docnos == []
        assert len(reader) == 30
    # A successful upsert replaces it in one commit.
    done = index.upsert(make_chunks([{**sample_docs[5], "text": "brandnewversion"}], dim=DIM))
    assert done.tombstoned == 1 and [s.n_chunks for s in done.shards] == [1]  # what this commit replaced
    assert index.search_bm25(["brandnewversion"], k=3)[0].docnos == [sample_docs[5]["_id"]]
    assert len(Index.open(index.path)) == 30 and index.counts()["tombstones"] == 1


@pytest.mark.integration
def test_two_processes_committing_different_shards_both_survive(tmp_path, sample_docs):
    index = Index.create(tmp_path / "idx", IndexSettings(dim=DIM))
    writers = []
    for w in range(2):
        code = _chunks_code(index.path, w * 100, (w + 1) * 100, f"w{w}") + f"""
        for i in range(10):
            part = chunks.slice(i * 10, 10)
            index.commit([index.write_shard("w{w}-" + str(i), part)])
        """
        writers.append(subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=REPO,
                                        stderr=subprocess.PIPE, text=True))
    for proc in writers:
        assert proc.wait(timeout=180) == 0, proc.stderr.read()
    final = Index.open(index.path)
    assert final.finished_shards() == {f"w{w}-{i}" for w in range(2) for i in range(10)}
    assert len(final) == 200 and final.generation == 20  # one per commit
    assert final.documents([sample_docs[150]["_id"]]).column("text").to_pylist()[0].endswith(" w1")
