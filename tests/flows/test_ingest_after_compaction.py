"""An ingestion run again after a compaction (``tessera index compact``, or the service's after many uploads): the
compaction gave the ingested shards new ids, yet the same command still resumes a crashed run, skips what is in,
takes in documents appended to the source, keeps the failure ledger's open failures and leaves deleted documents
out, as it does without the compaction; ``tessera index info`` reports the ingestion finished. BM25 only."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from flows.commands import main
from operators.store import Index

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "sample" / "corpus.jsonl"


def _docs(n: int, start: int = 0) -> list[str]:
    return [json.dumps({"_id": f"d{i}", "text": f"document {i} about bees and honey"}) + "\n"
            for i in range(start, start + n)]


def _ingest(capsys, source: Path, index: Path, *extra: str, shard_size: int = 2) -> tuple[int, dict]:
    capsys.readouterr()
    status = main(["ingest", "--source", str(source), "--index", str(index), "--shard-size", str(shard_size),
                   "--executor", "local", "--no-dense", "--quiet", "--json", *extra])
    out = capsys.readouterr().out
    return status, json.loads(out) if status == 0 else {}


#: The sample corpus's documents the crashed ingest reads: 4 shards of 30 (the whole corpus in 4 shards of 300 made
#: the same shards and counts, in more time).
CRASHED_DOCS = 120


def crash_after_the_first_shard(tmp_path: Path, index: Path) -> None:
    """``tessera ingest`` of the sample corpus's first ``CRASHED_DOCS`` documents (``tmp_path/corpus.jsonl``) in 4
    shards of 30 (BM25 only) in a process that dies after shard 1 is written: shard 0 is committed, the others are
    not."""
    source = tmp_path / "corpus.jsonl"
    source.write_text("".join(CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[:CRASHED_DOCS]),
                      encoding="utf-8")
    args = ["ingest", "--source", str(source), "--index", str(index), "--shard-size", "30", "--executor", "local",
            "--no-dense", "--quiet"]
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "TESSERA_RAW_STDERR": "1",
           "TESSERA_FAULT": "crash_after_write:1"}
    crashed = subprocess.run([sys.executable, "-m", "flows", *args], cwd=REPO, capture_output=True, text=True,
                             timeout=300, env=env)
    assert crashed.returncode == 75, crashed.stderr


def _compact(capsys, index: Path) -> None:
    capsys.readouterr()
    assert main(["index", "compact", str(index), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["shards_after"] == 1


def _unfinished(capsys, index: Path) -> list[dict]:
    capsys.readouterr()
    assert main(["index", "info", str(index), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["unfinished_ingestions"]


def _live_doc_ids(index: Path) -> list[str]:
    """The doc id of every live chunk, sorted, with repeats (a document ingested twice shows)."""
    return sorted(Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist())


def _live_docnos(index: Path) -> list[str]:
    """Every live chunk's id, with repeats (a long document is several chunks, each once)."""
    return Index.open(index).columns(["docno"])[1].column("docno").to_pylist()


def test_the_same_ingest_after_compactions_skips_what_is_in_and_takes_appended_documents(tmp_path, capsys,
                                                                                          monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    source, index = tmp_path / "docs.jsonl", tmp_path / "idx"
    source.write_text("".join(_docs(3)), encoding="utf-8")  # shards of 2 and 1 document
    status, first = _ingest(capsys, source, index)
    assert status == 0 and first["shards_written"] == 2
    _compact(capsys, index)

    status, again = _ingest(capsys, source, index)
    assert status == 0, "the same command after a compaction failed"
    assert (again["shards_written"], again["shards_skipped"], again["docs"]) == (0, 2, 0)
    assert _unfinished(capsys, index) == []

    with source.open("a", encoding="utf-8") as f:  # one more for the partial last shard, one for a new shard
        f.write("".join(_docs(2, start=3)))
    status, appended = _ingest(capsys, source, index)
    assert status == 0 and appended["docs"] == 2
    _compact(capsys, index)  # a compaction of the compacted index: the first ids stay finished too
    status, after = _ingest(capsys, source, index)
    assert status == 0 and (after["shards_written"], after["docs"]) == (0, 0)
    assert _unfinished(capsys, index) == []
    assert _live_doc_ids(index) == [f"d{i}" for i in range(5)]


@pytest.mark.process
def test_a_crashed_ingest_resumes_after_a_compaction(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    index = tmp_path / "idx"
    crash_after_the_first_shard(tmp_path, index)
    _compact(capsys, index)

    [record] = _unfinished(capsys, index)
    assert (record["shards_done"], record["shards_pending"], record["docs_pending"]) == (1, 3, 90)
    capsys.readouterr()
    assert main(shlex.split(record["resume"])[1:] + ["--executor", "local", "--quiet"]) == 0  # the command info gives
    assert _unfinished(capsys, index) == []
    docnos = _live_docnos(index)
    assert len(set(_live_doc_ids(index))) == CRASHED_DOCS and len(docnos) == len(set(docnos))


def test_failures_and_deleted_documents_keep_their_meaning_after_a_compaction(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    source, index = tmp_path / "docs.jsonl", tmp_path / "idx"
    lines = _docs(4)
    good = lines[2]
    lines[2] = '{"_id": "d2", "text": \n'  # not JSON: a read failure in the ledger
    source.write_text("".join(lines), encoding="utf-8")
    status, first = _ingest(capsys, source, index, shard_size=1)
    assert status == 0 and (first["docs"], first["open_failures"]) == (3, 1)
    assert main(["index", "delete", str(index), "--doc-id", "d3"]) == 0  # its shard has no live chunk left
    _compact(capsys, index)

    status, again = _ingest(capsys, source, index, shard_size=1)
    assert status == 0 and (again["shards_written"], again["open_failures"]) == (0, 1)
    assert _live_doc_ids(index) == ["d0", "d1"]  # the deleted document does not come back, as without compaction

    lines[2] = good  # fixed: the retry still finds the failure the compacted shard recorded
    source.write_text("".join(lines), encoding="utf-8")
    capsys.readouterr()
    assert main(["ingest", "--index", str(index), "--retry-failed", "--executor", "local", "--quiet", "--json"]) == 0
    retried = json.loads(capsys.readouterr().out)
    assert (retried["resolved"], retried["open_failures"]) == (1, 0)
    _compact(capsys, index)  # the retry's shard is merged too: its failure stays resolved
    status, last = _ingest(capsys, source, index, shard_size=1)
    assert status == 0 and (last["shards_written"], last["open_failures"]) == (0, 0)
    assert _live_doc_ids(index) == ["d0", "d1", "d2"]
    assert _unfinished(capsys, index) == []
