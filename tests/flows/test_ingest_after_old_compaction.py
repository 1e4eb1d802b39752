"""An index compacted by a release before 2026-11-30: its ``manifest.json`` is format 1 and has no ``merged_shards``
(the compaction did not record the ids of the shards it merged). Made here as that release left it: an index built,
changed and compacted by this release, its manifest then written as the earlier one wrote it (format 1, no
``merged_shards`` key). This release recovers the merged ids from the ingestion staging (``operators.store.upgrade``):
``tessera index info`` reports the ingestion finished, the same ingest does nothing and keeps deleted documents out,
appended documents go in alone, and the first write records the recovered ids as format 2. BM25 only."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from flows.commands import main
from flows.ingestion.pending import unfinished
from operators.store import Index
from tests.flows.test_ingest_after_compaction import CRASHED_DOCS, crash_after_the_first_shard

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "sample" / "corpus.jsonl"


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))


def _docs(n: int, start: int = 0) -> str:
    return "".join(json.dumps({"_id": f"d{i}", "text": f"document {i} about bees and honey"}) + "\n"
                   for i in range(start, start + n))


def _ingest(capsys, source: Path, index: Path, *extra: str) -> dict:
    capsys.readouterr()
    status = main(["ingest", "--source", str(source), "--index", str(index), "--shard-size", "2",
                   "--executor", "local", "--no-dense", "--quiet", "--json", *extra])
    out = capsys.readouterr()
    assert status == 0, out.err
    return json.loads(out.out)


def _compact(capsys, index: Path) -> None:
    capsys.readouterr()
    assert main(["index", "compact", str(index), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["shards_after"] == 1


def _info(capsys, index: Path) -> tuple[dict, str]:
    """``tessera index info``: its JSON, and its text (where the warning of an unfinished ingestion goes)."""
    capsys.readouterr()
    assert main(["index", "info", str(index), "--json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert main(["index", "info", str(index)]) == 0
    out = capsys.readouterr()
    return as_json, out.out + out.err


def _manifest(index: Path) -> dict:
    return json.loads((index / "manifest.json").read_text())


def _as_an_earlier_release_wrote_it(index: Path, merged_shards: list[str] | None = None) -> None:
    """The manifest as a release before 2026-11-30 left it: format 1, no ``merged_shards``; with ``merged_shards``,
    as that release's index after one write by the release of 2026-11-30 (format 1, ``merged_shards: []``)."""
    raw = _manifest(index)
    del raw["merged_shards"]
    if merged_shards is not None:
        raw["merged_shards"] = merged_shards
    raw["format"] = 1
    (index / "manifest.json").write_text(json.dumps(raw, indent=1), encoding="utf-8")


def _live_doc_ids(index: Path) -> list[str]:
    return sorted(Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist())


def _ingested_deleted_compacted(capsys, tmp_path) -> tuple[Path, Path, list[str]]:
    """7 documents in 4 shards (2, 2, 2, 1), d1 deleted, compacted: (source, index, the ingested shard ids)."""
    source, index = tmp_path / "docs.jsonl", tmp_path / "idx"
    source.write_text(_docs(7), encoding="utf-8")
    assert _ingest(capsys, source, index)["shards_written"] == 4
    ingested = sorted(s.id for s in Index.open(index).manifest.shards)
    assert main(["index", "delete", str(index), "--doc-id", "d1"]) == 0
    _compact(capsys, index)
    return source, index, ingested


def test_an_ingestion_before_an_earlier_release_compacted_is_finished(tmp_path, capsys):
    source, index, ingested = _ingested_deleted_compacted(capsys, tmp_path)
    _as_an_earlier_release_wrote_it(index)

    assert unfinished(index) == []
    info, text = _info(capsys, index)
    assert info["unfinished_ingestions"] == [] and "unfinished" not in text
    # what is on disk, which an earlier release still reads, beside the format it is read as (it said 2)
    assert (info["stored_format"], info["format"]) == (1, 2)
    assert "format 1 on disk, read as 2, which the next write stores" in text
    assert Index.open(index).finished_shards() >= set(ingested)
    assert _manifest(index)["format"] == 1 and "merged_shards" not in _manifest(index)  # reading writes nothing

    again = _ingest(capsys, source, index)  # the same command: all done, the deleted document stays deleted
    assert (again["shards_written"], again["shards_skipped"], again["docs"]) == (0, 4, 0)
    assert _live_doc_ids(index) == ["d0", "d2", "d3", "d4", "d5", "d6"]

    with source.open("a", encoding="utf-8") as f:  # d7 completes the partial last shard, d8 starts a new one
        f.write(_docs(2, start=7))
    appended = _ingest(capsys, source, index)
    assert (appended["shards_written"], appended["docs"]) == (2, 2)
    assert _live_doc_ids(index) == ["d0", "d2", "d3", "d4", "d5", "d6", "d7", "d8"]
    manifest = _manifest(index)  # the first write recorded what the earlier compaction merged
    assert manifest["format"] == 2 and manifest["merged_shards"] == ingested
    assert unfinished(index) == []
    info, text = _info(capsys, index)
    assert info["stored_format"] == 2 and "on disk" not in text


@pytest.mark.parametrize("written_by", ["earlier release", "release of 2026-11-30"])
def test_the_first_write_records_the_merged_shards_as_format_2(tmp_path, capsys, written_by):
    source, index, ingested = _ingested_deleted_compacted(capsys, tmp_path)
    _as_an_earlier_release_wrote_it(index, [] if written_by == "release of 2026-11-30" else None)

    assert main(["index", "delete", str(index), "--doc-id", "d0"]) == 0  # a write by the store alone
    manifest = _manifest(index)
    assert manifest["format"] == 2 and manifest["merged_shards"] == ingested
    assert unfinished(index) == []
    again = _ingest(capsys, source, index)
    assert (again["shards_written"], again["docs"]) == (0, 0)
    assert _live_doc_ids(index) == ["d2", "d3", "d4", "d5", "d6"]


@pytest.mark.process
def test_a_crashed_ingest_resumes_after_an_earlier_release_compacted_it(tmp_path, capsys):
    index = tmp_path / "idx"
    crash_after_the_first_shard(tmp_path, index)
    _compact(capsys, index)
    _as_an_earlier_release_wrote_it(index)

    [record] = _info(capsys, index)[0]["unfinished_ingestions"]  # the staged shards not committed stay unfinished
    assert (record["shards_done"], record["shards_pending"], record["docs_pending"]) == (1, 3, 90)
    capsys.readouterr()
    assert main(shlex.split(record["resume"])[1:] + ["--executor", "local", "--quiet"]) == 0
    assert unfinished(index) == []
    docnos = Index.open(index).columns(["docno"])[1].column("docno").to_pylist()
    assert len(set(_live_doc_ids(index))) == CRASHED_DOCS and len(docnos) == len(set(docnos))
    merged = _manifest(index)["merged_shards"]
    assert len(merged) == 1 and merged[0].endswith("-00000")  # only what the compaction merged
