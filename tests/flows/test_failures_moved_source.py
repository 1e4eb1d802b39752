"""A read failure whose file moved stayed open for good: the ledger names the file whole, so in a home moved
elsewhere (``mv``, a backup restored at another path) ``--retry-failed`` said the file was not there and to put it
back, and a corpus moved and ingested from its new path was refused as live documents (its fixed line made it
another corpus), while its failures named the old path. Real ingestions of a small JSONL corpus with a bad line,
``tessera ingest`` in-process, homes and folders moved with ``shutil.move``."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flows.commands import main
from flows.ingestion.ledger import open_failures_at

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "data" / "sample" / "corpus.jsonl"


def corpus(path: Path, bad: bool = True) -> list[str]:
    """30 documents of the sample corpus at ``path``, the fifth line not JSON (``bad``) or as it was."""
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:30]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines[:4] + ["{not json\n" if bad else lines[4]] + lines[5:]), encoding="utf-8")
    return lines


def ingest(capsys, *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["ingest", "--no-dense", "--executor", "local", *args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def ingested_then_moved(tmp_path: Path, index: Path, capsys) -> list[str]:
    """The corpus ``a/docs.jsonl`` (its fifth line bad) ingested into ``index``, then its folder moved to ``b``."""
    lines = corpus(tmp_path / "a" / "docs.jsonl")
    code, out = ingest(capsys, "--source", str(tmp_path / "a" / "docs.jsonl"), "--index", str(index),
                       "--shard-size", "10")
    assert code == 0, out
    shutil.move(tmp_path / "a", tmp_path / "b")
    return lines


def live_ids(index: Path) -> list[str]:
    from operators.store import Index

    return sorted(set(Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist()))


def test_retry_failed_in_a_moved_home_reads_the_file_that_moved_with_it(tmp_path, capsys, monkeypatch):
    old, new = tmp_path / "old-home", tmp_path / "new-home"
    lines = corpus(old / "corpus" / "docs.jsonl")
    monkeypatch.setenv("TESSERA_HOME", str(old))
    code, out = ingest(capsys, "--source", str(old / "corpus" / "docs.jsonl"), "--index", "idx", "--shard-size", "10")
    assert code == 0, out
    assert [f.line for f in open_failures_at(old / "indices" / "idx")] == [5]
    shutil.move(old, new)
    monkeypatch.setenv("TESSERA_HOME", str(new))
    corpus(new / "corpus" / "docs.jsonl", bad=False)  # fixed where it is now
    code, out = ingest(capsys, "--index", "idx", "--retry-failed")
    assert code == 0, out  # it said: ... is not there; put the file back (fixed) to retry them
    assert "retried: 1 failure(s) now in the index" in out
    assert open_failures_at(new / "indices" / "idx") == []
    assert live_ids(new / "indices" / "idx") == sorted(json.loads(line)["_id"] for line in lines)


def test_a_moved_corpus_with_its_failed_line_fixed_is_resumed_from_its_new_path_and_retried_there(tmp_path, capsys):
    index = tmp_path / "idx"
    lines = ingested_then_moved(tmp_path, index, capsys)
    corpus(tmp_path / "b" / "docs.jsonl", bad=False)
    code, out = ingest(capsys, "--source", str(tmp_path / "b" / "docs.jsonl"), "--index", str(index))
    assert code == 0, out  # it said: document(s) [...] are already live in IDX; ... tessera ingest --replace
    assert "nothing to do: every shard of this source is in the index already" in out
    assert [(f.path, f.line) for f in open_failures_at(index)] == [(str(tmp_path / "a" / "docs.jsonl"), 5)]
    code, out = ingest(capsys, "--index", str(index), "--retry-failed")
    assert code == 0, out  # it said: ... a/docs.jsonl is not there; put the file back (fixed) to retry them
    assert "retried: 1 failure(s) now in the index" in out
    assert open_failures_at(index) == []
    assert live_ids(index) == sorted(json.loads(line)["_id"] for line in lines)


def test_a_moved_corpus_ingested_from_its_new_path_does_not_record_its_failed_line_again(tmp_path, capsys):
    index = tmp_path / "idx"
    ingested_then_moved(tmp_path, index, capsys)
    code, out = ingest(capsys, "--source", str(tmp_path / "b" / "docs.jsonl"), "--index", str(index))
    assert code == 0, out  # it made a shard of the line alone: "no document was ingested: all 1 failed" (exit 1)
    assert "left out" not in out
    assert len(open_failures_at(index)) == 1  # the one failure, not it twice under both paths
    corpus(tmp_path / "b" / "docs.jsonl", bad=False)
    code, out = ingest(capsys, "--index", str(index), "--retry-failed")
    assert code == 0 and "retried: 1 failure(s) now in the index" in out, out
    assert open_failures_at(index) == []


def test_replace_from_the_new_path_closes_the_failures_of_the_corpus_it_moved_from(tmp_path, capsys):
    index = tmp_path / "idx"
    lines = ingested_then_moved(tmp_path, index, capsys)
    corpus(tmp_path / "b" / "docs.jsonl", bad=False)
    code, out = ingest(capsys, "--source", str(tmp_path / "b" / "docs.jsonl"), "--index", str(index), "--replace")
    assert code == 0, out
    assert open_failures_at(index) == []  # it stayed open, and --retry-failed said to put a/docs.jsonl back
    assert live_ids(index) == sorted(json.loads(line)["_id"] for line in lines)
    code, out = ingest(capsys, "--index", str(index), "--retry-failed")
    assert code == 0 and "nothing to retry" in out, out


def info(capsys, index: str) -> tuple[list[str], dict]:
    capsys.readouterr()
    assert main(["index", "info", index]) == 0
    lines = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert main(["index", "info", index, "--json"]) == 0
    return lines, json.loads(capsys.readouterr().out)


@pytest.mark.process
def test_index_info_names_a_source_where_it_moved_with_the_home_and_resumes_it_there(tmp_path, capsys, monkeypatch):
    old, new = tmp_path / "old-home", tmp_path / "new-home"
    corpus(old / "corpus" / "docs.jsonl", bad=False)
    env = {**os.environ, "TESSERA_HOME": str(old), "TESSERA_FAULT": "crash_after_write:1"}
    env.pop("TESSERA_DEBUG", None)
    crashed = subprocess.run([sys.executable, "-m", "flows", "ingest", "--source", str(old / "corpus" / "docs.jsonl"),
                              "--index", "idx", "--shard-size", "10", "--executor", "local", "--no-dense", "--quiet"],
                             cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert crashed.returncode == 75, crashed.stderr  # one shard of three committed
    shutil.move(old, new)
    monkeypatch.setenv("TESSERA_HOME", str(new))
    lines, data = info(capsys, "idx")
    here = str(new / "corpus" / "docs.jsonl")
    # it named the old home's path, there and in the command that resumes it
    assert f"source {here} (sources.jsonl): 30 document(s) in 3 shard(s); ingested from " \
           f"{old / 'corpus' / 'docs.jsonl'}, in the home it moved from" in lines
    [source] = data["sources"]
    assert (source["source"], source["recorded"], source["there"]) == (here, str(old / "corpus" / "docs.jsonl"), True)
    [unfinished] = data["unfinished_ingestions"]
    assert unfinished["resume"].startswith(
        shlex.join(["tessera", "ingest", "--source", str(here), "--index", str(new / "indices" / "idx")]))
    code, out = ingest(capsys, *shlex.split(unfinished["resume"])[2:])
    assert code == 0, out
    assert "20 docs -> " in out and "(1 already done)" in out
    shutil.move(new / "corpus", tmp_path / "elsewhere")
    lines, data = info(capsys, "idx")
    assert f"source {here} (sources.jsonl): 30 document(s) in 3 shard(s); not there now (moved or removed since it " \
           "was ingested: ingest it from where it is to follow it)" in lines
    assert (data["sources"][0]["recorded"], data["sources"][0]["there"]) == (None, False)


def test_retry_failed_with_sync_closes_the_failures_of_a_file_gone_for_good_and_retries_the_others(tmp_path, capsys):
    index = tmp_path / "idx"
    corpus(tmp_path / "gone" / "docs.jsonl")
    lines = corpus(tmp_path / "kept" / "docs.jsonl")
    lines = [line.replace('"_id": "', '"_id": "k-', 1) for line in lines]
    (tmp_path / "kept" / "docs.jsonl").write_text("".join(lines[:4] + ["{not json\n"] + lines[5:]), encoding="utf-8")
    for folder in ("gone", "kept"):
        code, out = ingest(capsys, "--source", str(tmp_path / folder / "docs.jsonl"), "--index", str(index))
        assert code == 0, out
    shutil.rmtree(tmp_path / "gone")
    (tmp_path / "kept" / "docs.jsonl").write_text("".join(lines), encoding="utf-8")
    code, out = ingest(capsys, "--index", str(index), "--retry-failed")
    assert code == 2 and f"{tmp_path / 'gone' / 'docs.jsonl'} is not there; put the file back (fixed)" in out, out
    assert "to close them, the file gone for good, retry with --sync" in out
    code, out = ingest(capsys, "--index", str(index), "--retry-failed", "--sync")
    assert code == 0, out  # it said: a retry processes the failures in the ledger alone; ... without --retry-failed
    assert "retried: 1 failure(s) now in the index" in out and "closed: 1 failure(s) of files no longer there" in out
    assert open_failures_at(index) == []
    assert "k-" + json.loads(SAMPLE.read_text(encoding="utf-8").splitlines()[4])["_id"] in live_ids(index)
