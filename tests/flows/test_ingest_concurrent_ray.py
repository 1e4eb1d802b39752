"""Two ingests of the same source into the same index at once, on Ray: both finish, the index holds every
document once, and each run counts only the shards it committed; a shard the other run committed first is
counted as done by another ingest (``shards_elsewhere``), whichever stage this run had reached with it.

The other ingest runs to its end inside this one's progress callback, at a chosen point, so the race is not
left to the scheduler: before this run's Ray stages start (every staged file this run is about to read is
gone), or at its first commit (shards this run wrote wait to be committed, and the other writes and commits
them too). BM25 only, so that the other run's stages need no CPU this run's actors hold. A slice of SciFact.
"""

from __future__ import annotations

import json

import pytest

from flows.ingestion import ingest
from operators.store import Index

pytestmark = [pytest.mark.ray, pytest.mark.data]

DOCS = 120
SHARD_SIZE = 20
SHARDS = DOCS // SHARD_SIZE


@pytest.fixture
def corpus(shared_data, tmp_path):
    """SciFact's first ``DOCS`` abstracts."""
    with open(shared_data / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        lines = [next(f) for _ in range(DOCS)]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    return path, [json.loads(line)["_id"] for line in lines]


def _ingest(corpus_path, index, on_progress=None):
    return ingest(corpus_path, index, settings={"dense": False}, chunk=False, shard_size=SHARD_SIZE, executor="ray",
                  progress=False, on_progress=on_progress)


def race(run, *, at_commits: int):
    """This run's report and the other's, each ``run(on_progress)``, the other started inside this one's progress
    callback once this one has committed ``at_commits`` shards (0: once its shards are planned, before any is
    processed)."""
    other = []

    def on_progress(event) -> None:
        if event.stage == "ingest" and event.shards == at_commits and not other:
            other.append(run(None))

    mine = run(on_progress)
    [theirs] = other
    return mine, theirs


def _race(corpus_path, index, *, at_commits: int):
    return race(lambda on_progress: _ingest(corpus_path, index, on_progress), at_commits=at_commits)


def _check_truthful(index, ids, mine, theirs) -> None:
    held = Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist()
    assert sorted(held) == sorted(ids)  # every document, once
    assert len(Index.open(index).finished_shards()) == SHARDS
    for report in (mine, theirs):
        assert report.shards_total == SHARDS
        assert report.shards_written + report.shards_skipped == SHARDS, report
    # each shard (and each document) is claimed by exactly one run
    assert mine.shards_written + theirs.shards_written == SHARDS, (mine, theirs)
    assert mine.docs + theirs.docs == DOCS, (mine, theirs)
    assert theirs.shards_elsewhere == 0  # the other ran to its end while this one waited


def test_staged_files_the_other_ingest_committed_and_removed_are_done_elsewhere(corpus, tmp_path, ray_session):
    corpus_path, ids = corpus
    index = tmp_path / "idx"
    mine, theirs = _race(corpus_path, index, at_commits=0)
    _check_truthful(index, ids, mine, theirs)
    assert (theirs.shards_written, mine.shards_written, mine.shards_elsewhere) == (SHARDS, 0, SHARDS)
    assert not list((index / "_ingest").glob("*/*.parquet"))  # no staged file left behind


def test_shards_both_ingests_wrote_count_for_the_one_that_committed_them(corpus, tmp_path, ray_session):
    corpus_path, ids = corpus
    index = tmp_path / "idx"
    mine, theirs = _race(corpus_path, index, at_commits=1)
    _check_truthful(index, ids, mine, theirs)
    assert mine.shards_written >= 1 and mine.shards_elsewhere == SHARDS - mine.shards_written
    assert Index.open(index).check() == {}  # the committed shards' files are the ones the manifest names
