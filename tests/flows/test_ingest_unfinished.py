"""An index whose ingestion did not finish: ``tessera index info`` says so (text and ``--json``, with the command
that resumes it) and ``tessera run`` warns on stderr, as a search sees only the committed shards. And an ingest
that loses a race with another ingest of the same source (the same planned shard ids) treats the shards the
other committed as done instead of failing. BM25 only, on the sample corpus's first 120 documents (the whole
corpus, 1000, in shards ten times as large, made the same shards and counts, in three times the time)."""

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
SAMPLE = REPO / "data" / "sample" / "corpus.jsonl"
DOCS = 120  # of the sample's documents: 4 shards of 30


@pytest.fixture
def corpus(tmp_path) -> Path:
    """The sample corpus's first ``DOCS`` documents."""
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:DOCS]), encoding="utf-8")
    return path


def _ingest_args(index: Path, corpus: Path, size: int = 30) -> list[str]:
    return ["ingest", "--source", str(corpus), "--index", str(index), "--shard-size", str(size), "--executor", "local",
            "--no-dense", "--quiet"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "TESSERA_HOME": str(tmp_path / "home"), "TESSERA_RAW_STDERR": "1", **extra}
    env.pop("TESSERA_DEBUG", None)
    return env


def _doc_ids(index: Path) -> int:
    """How many distinct documents the index holds (a long one is several chunks)."""
    return len(set(Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist()))


def _run_warnings(capsys, index: Path) -> list[str]:
    capsys.readouterr()
    assert main(["run", "bm25", "--index", str(index), "-q", "honey bees", "--no-cache", "--quiet", "--json"]) == 0
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("tessera: warning:")]


@pytest.mark.process
def test_info_and_run_report_an_unfinished_ingestion_until_it_is_resumed(tmp_path, capsys, monkeypatch, corpus):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    index = tmp_path / "idx"
    # the ingest dies after shard 1 is written and before its commit: shard 0 of 4 is in the index
    crashed = subprocess.run([sys.executable, "-m", "flows", *_ingest_args(index, corpus)], cwd=REPO,
                             capture_output=True, text=True, timeout=300,
                             env=_env(tmp_path, TESSERA_FAULT="crash_after_write:1"))
    assert crashed.returncode == 75, crashed.stderr

    assert main(["index", "info", str(index), "--json"]) == 0
    [record] = json.loads(capsys.readouterr().out)["unfinished_ingestions"]
    assert record["source"] == str(corpus)
    assert (record["shards_planned"], record["shards_done"], record["shards_pending"], record["docs_pending"]) == \
        (4, 1, 3, 90)
    assert main(["index", "info", str(index)]) == 0
    text = capsys.readouterr().out
    assert "unfinished ingestion of" in text and "1 of 4 shard(s) committed, 90 document(s) not yet" in text
    assert f"resume: {record['resume']}" in text

    [warning] = _run_warnings(capsys, index)
    assert str(index) in warning and "step 'bm25'" in warning and "1 of 4 shard(s) committed" in warning

    # the printed command resumes it (run in-process, without Ray, as the rest of this test)
    resume = shlex.split(record["resume"])
    assert resume[:2] == ["tessera", "ingest"] and "--no-dense" in resume
    assert main([*resume[1:], "--executor", "local", "--quiet"]) == 0
    assert _doc_ids(index) == DOCS
    capsys.readouterr()
    assert main(["index", "info", str(index), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unfinished_ingestions"] == []
    assert _run_warnings(capsys, index) == []


@pytest.mark.process
def test_the_command_that_resumes_a_replace_run_replaces_too(tmp_path, capsys, monkeypatch, corpus):
    """A --replace run stages every copy of an id and replaces live documents: the resume command left --replace
    out, and ran as printed it was refused ("already live")."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    index = tmp_path / "idx"
    assert main(_ingest_args(index, corpus)) == 0
    edited = tmp_path / "edited.jsonl"  # the same ids, their texts changed
    edited.write_text("".join(json.dumps({**json.loads(line), "text": json.loads(line)["text"] + " Edited."}) + "\n"
                              for line in corpus.read_text(encoding="utf-8").splitlines()), encoding="utf-8")
    again = [*_ingest_args(index, edited), "--replace"]
    crashed = subprocess.run([sys.executable, "-m", "flows", *again], cwd=REPO,
                             capture_output=True, text=True, timeout=300,
                             env=_env(tmp_path, TESSERA_FAULT="crash_after_write:1"))
    assert crashed.returncode == 75, crashed.stderr
    capsys.readouterr()
    assert main(["index", "info", str(index), "--json"]) == 0
    [record] = json.loads(capsys.readouterr().out)["unfinished_ingestions"]
    resume = shlex.split(record["resume"])
    assert "--replace" in resume, resume
    assert main([*resume[1:], "--executor", "local", "--quiet"]) == 0
    assert _doc_ids(index) == DOCS
    texts = Index.open(index).columns(["text"])[1].column("text").to_pylist()
    assert sum(text.endswith(" Edited.") for text in texts) >= DOCS  # every document's last passage is the new one


def test_shards_another_ingest_commits_meanwhile_count_as_done(tmp_path, capsys, monkeypatch, corpus):
    """The other ingest runs to its end at this one's first progress report after staging (so after this one
    planned its shards): this one then finds its next shards committed, or their staged files gone."""
    from flows.ingestion import ingest

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    index = tmp_path / "idx"
    other = []

    def on_progress(event) -> None:
        if event.stage == "ingest" and not other:
            other.append(main(_ingest_args(index, corpus, size=12)))

    report = ingest(str(corpus), index, settings={"dense": False}, shard_size=12, executor="local", progress=False,
                    on_progress=on_progress)
    assert other == [0]
    assert report.shards_total == 10 and report.shards_elsewhere >= 8, report
    assert report.shards_written + report.shards_skipped == 10, report
    assert _doc_ids(index) == DOCS and len(Index.open(index).finished_shards()) == 10
    capsys.readouterr()
    assert main(["index", "info", str(index), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["damaged"] == {} and info["unfinished_ingestions"] == []


def test_a_python_resume_with_other_params_is_told_the_python_call_that_resumes(tmp_path, monkeypatch, corpus):
    """``flows.api.ingest`` refused a resume with other chunking naming the ``tessera ingest`` command that resumes;
    a Python caller is told the ``flows.api.ingest(...)`` call, and that call resumes (each document once)."""
    import flows.api
    from flows.ingestion.errors import SettingsMismatchError

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    index, commit, commits = tmp_path / "idx", Index.commit, []

    def stopped_after_one(store, *args, **kwargs):  # Ctrl-C in the second commit
        commits.append(1)
        if len(commits) > 1:
            raise KeyboardInterrupt
        return commit(store, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(Index, "commit", stopped_after_one)
        with pytest.raises(KeyboardInterrupt):
            flows.api.ingest(corpus, index, shard_size=30, settings={"dense": False}, chunk=False, progress=False)
    with pytest.raises(SettingsMismatchError) as refusal:
        flows.api.ingest(corpus, index, settings={"dense": False}, progress=False)  # chunked, by the default spec
    call = f"flows.api.ingest({str(corpus)!r}, {str(index)!r}, shard_size=30, settings={{'dense': False}}, chunk=False)"
    assert f"resume with the same ones ({call} does" in refusal.value.message, refusal.value.message
    eval(call, {"flows": flows})
    assert _doc_ids(index) == DOCS


@pytest.mark.slow  # two processes at once; the test above makes the same race deterministic
def test_two_ingests_of_the_same_source_at_once_both_succeed(tmp_path):
    index = tmp_path / "idx"
    procs = [subprocess.Popen([sys.executable, "-m", "flows", *_ingest_args(index, SAMPLE, size=50)], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(tmp_path))
             for _ in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "already committed" not in err
    assert _doc_ids(index) == 1000
