"""Two ingests of one source at once, where a spec step rejects documents: each failed document is counted by
exactly one run and is in ``failures.jsonl`` once, also in a shard whose every document failed. Such a shard has
no shard folder to commit; its ledger attempt is its commit, so both runs could record (and count) it.

As in ``test_ingest_concurrent_ray``, the other ingest runs to its end inside this one's progress callback, so the
race is not left to the scheduler: before this run processed any shard (the staged files it is about to read are
gone), or once this run committed the shards before the failed one, with that one read ahead (the local executor
prepares the next shard while it commits one). The rejecting step is a real row-scope operator of a plugin package
(``TESSERA_OPERATORS``), a validator that refuses the documents it is told to; BM25 only, a slice of the sample.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.ingestion import ingest
from flows.ingestion.ledger import LEDGER_FILE, Ledger
from operators.store import Index
from tests.flows.test_ingest_concurrent_ray import race
from tests.operators.test_plugins import PACKAGE, fresh_registry, write_package  # noqa: F401

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample" / "corpus.jsonl"
SHARD_SIZE = 10
DOCS = 30  # shards 0 and 1 keep documents; every document of shard 2 is refused
REFUSED = [12, *range(20, 30)]  # positions in the source: one of shard 1, all of shard 2

REFUSE = '''\
"""A validator step: the documents it is told to refuse fail it (as a real check fails bad rows)."""

from __future__ import annotations

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Operator


class RefuseDocs(Operator):
    """Fail on a table holding a refused document; alone, every other document passes."""

    name = "mylab.refuse_docs"

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        ids: list[str] = Field(default_factory=list, description="Document ids refused.")

    def reads(self) -> list[str]:
        return ["docno"]

    def transform(self, table: pa.Table) -> pa.Table:
        refused = sorted(set(table.column("docno").to_pylist()) & set(self.params.ids))
        if refused:
            raise ValueError(f"refused: {refused}")
        return table
'''


@pytest.fixture
def corpus(tmp_path, monkeypatch, fresh_registry):  # noqa: F811
    """The sample's first ``DOCS`` documents, and the ingest spec whose validator step refuses ``REFUSED``."""
    root = write_package(tmp_path / "site", {"refuse": REFUSE})
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setenv("TESSERA_OPERATORS", f"{PACKAGE}.refuse")
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:DOCS]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    refused = [json.loads(lines[i])["_id"] for i in REFUSED]
    spec = {"name": "ingest-refusing", "steps": {
        "read": {"op": "sources.jsonl", "params": {"path": str(path)}},
        "validate": {"op": "mylab.refuse_docs", "params": {"ids": refused}}}}
    return path, spec, refused


def _ingest(corpus, index, on_progress=None):
    path, spec, _ = corpus
    return ingest(path, index, spec=spec, settings={"dense": False}, chunk=False, shard_size=SHARD_SIZE,
                  executor="local", progress=False, on_progress=on_progress)


def _race(corpus, index, *, at_commits: int):
    return race(lambda on_progress: _ingest(corpus, index, on_progress), at_commits=at_commits)


def _check_counted_once(index: Path, refused: list[str], mine, theirs) -> None:
    assert mine.failures + theirs.failures == len(refused), (mine, theirs)
    assert mine.shards_written + theirs.shards_written == DOCS // SHARD_SIZE, (mine, theirs)
    events = [json.loads(line) for line in (index / LEDGER_FILE).read_text(encoding="utf-8").splitlines()]
    recorded = [e["doc_id"] for e in events if e["event"] == "failure"]
    assert sorted(recorded) == sorted(refused)  # no failure written twice
    assert [e["shard"] for e in events if e["event"] == "attempt"] == sorted(
        {e["shard"] for e in events if e["event"] == "attempt"})  # one attempt per shard, in order
    finished = Index.open(index).finished_shards()
    assert sorted(f.doc_id for f in Ledger(index).open_failures(finished)) == sorted(refused)
    held = Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist()
    assert sorted(held) == sorted(set(json.loads(line)["_id"] for line in SAMPLE.read_text().splitlines()[:DOCS])
                                  - set(refused))


def test_a_failed_shard_the_other_ingest_finished_first_is_done_elsewhere(corpus, tmp_path):
    mine, theirs = _race(corpus, tmp_path / "idx", at_commits=0)
    _check_counted_once(tmp_path / "idx", corpus[2], mine, theirs)
    assert (theirs.failures, mine.failures, mine.shards_elsewhere) == (len(corpus[2]), 0, DOCS // SHARD_SIZE)


def test_a_failed_shard_both_ingests_read_is_counted_by_the_one_that_recorded_it(corpus, tmp_path):
    mine, theirs = _race(corpus, tmp_path / "idx", at_commits=2)
    _check_counted_once(tmp_path / "idx", corpus[2], mine, theirs)
    assert (mine.shards_written, mine.failures, mine.shards_elsewhere) == (2, 1, 1)
    assert (theirs.shards_written, theirs.failures) == (1, SHARD_SIZE)
    assert not list((tmp_path / "idx" / "_ingest").glob("*/*.parquet"))  # no staged file left behind
