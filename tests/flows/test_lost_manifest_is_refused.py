"""A folder whose ``manifest.json`` is lost but whose shards are there is not an empty place for a new index:
``tessera index add`` and ``tessera ingest`` refuse it in one line with status 2, before any embedding, and touch
nothing (a new manifest would leave the old shards to the next compaction, which deletes them). A first ingestion
that crashed before its first commit (staged shards, maybe some of them written, no manifest) still resumes.
BM25 only, on the sample corpus's first 120 documents (the whole corpus, 1000, took longer to the same end). The
refusals run in this process (``flows.commands.main``, what the console script calls: a process each cost seconds of
``make test-fast``), as does the crashed ingest's resume; the crash runs in a process of its own."""

from __future__ import annotations

import shlex
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

import flows.api
from flows.commands import main
from operators.store import Index
from operators.store.errors import UnfinishedFirstIngestError

REPO = Path(__file__).resolve().parents[2]
CORPUS = REPO / "data" / "sample" / "corpus.jsonl"
TESSERA = Path(sys.executable).with_name("tessera")
DOCS = 120  # the sample corpus's first documents the index is made of


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(CORPUS.read_text(encoding="utf-8").splitlines(keepends=True)[:DOCS]), encoding="utf-8")
    return path


def tessera(*args: str, home: Path, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess:
    environ = {**os.environ, "TESSERA_HOME": str(home), **env}
    environ.pop("TESSERA_DEBUG", None)
    return subprocess.run([str(TESSERA), *args], env=environ, input=stdin, capture_output=True, text=True,
                          timeout=300)


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


def in_process(*args: str, home: Path, monkeypatch, capsys, stdin: str = "") -> subprocess.CompletedProcess:
    """``tessera ARGS`` in this process, answered as ``subprocess.run`` would."""
    monkeypatch.setenv("TESSERA_HOME", str(home))
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    capsys.readouterr()
    status = main(list(args))
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, status, out.out, out.err)


def refused(proc: subprocess.CompletedProcess, index: Path) -> None:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert f"{index} holds 1 shard folder(s) but no manifest.json" in lines[0], lines[0]
    assert "restore the manifest, or give another path" in lines[0], lines[0]


def test_index_add_and_ingest_refuse_a_folder_whose_manifest_is_lost_and_touch_nothing(tmp_path, monkeypatch,
                                                                                     capsys, corpus):
    home, index = tmp_path / "home", tmp_path / "i"

    def tessera(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
        return in_process(*args, home=home, monkeypatch=monkeypatch, capsys=capsys, stdin=stdin)

    assert tessera("index", "add", str(index), str(corpus), "--no-dense").returncode == 0
    (index / "manifest.json").unlink()
    before = listing(index)
    new_doc = '{"_id": "n1", "text": "honey bees"}\n'
    refused(tessera("index", "add", str(index), "-", "--no-dense", stdin=new_doc), index)
    # a dense add with an encoder that does not exist: refused for the folder, not for the model it never loads
    refused(tessera("index", "add", str(index), "-", "--encoder", str(tmp_path / "no-such-model"), stdin=new_doc),
            index)
    source = tmp_path / "new.jsonl"
    source.write_text(new_doc)
    refused(tessera("ingest", "--source", str(source), "--index", str(index), "--executor", "local", "--no-dense",
                    "--quiet"), index)
    assert listing(index) == before


@pytest.mark.process
def test_a_first_ingest_that_crashed_before_its_manifest_still_resumes(tmp_path, monkeypatch, capsys, corpus):
    """The state of a first ingestion that failed before its first commit once its manifest is undone: staged
    shards under ``_ingest/``, the first one written to ``shards/`` but recorded nowhere."""
    home, index = tmp_path / "home", tmp_path / "i"
    args = ["ingest", "--source", str(corpus), "--index", str(index), "--shard-size", "48", "--executor", "local",
            "--no-dense", "--quiet"]
    crashed = tessera(*args, home=home, TESSERA_FAULT="crash_after_write:0")
    assert crashed.returncode == 75, crashed.stderr
    written = [p.name for p in (index / "shards").iterdir() if not p.name.startswith(".")]
    assert len(written) == 1 and written[0].endswith("-00000") and list((index / "_ingest").glob(f"*/{written[0]}.*"))
    (index / "manifest.json").unlink()
    resumed = in_process(*args, home=home, monkeypatch=monkeypatch, capsys=capsys)  # the crash alone needs a process
    assert resumed.returncode == 0, resumed.stderr
    doc_ids = Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist()
    assert len(set(doc_ids)) == DOCS and len(doc_ids) == len(Index.open(index))  # each once


@pytest.mark.parametrize("moment, folder_was_there", [("commit", False), ("ledger", True)])
def test_ctrl_c_in_the_first_commit_leaves_no_manifest_without_its_shard(tmp_path, monkeypatch, capsys, corpus,
                                                                         moment, folder_was_there):
    """Ctrl-C in an ingest's first commit (waiting for the index's lock, or under it after the failure ledger's
    write, before the manifest's) left the manifest the run had made with no shard: ``index info`` and searches
    showed an empty index of generation 0 until the next run. It is now a run stopped before its first commit, which
    keeps the staged source (opening the folder says the command that resumes it), in a folder it made too: that
    one was removed, so the same command read and staged the whole source again instead of resuming."""
    from flows.ingestion.ledger import Ledger

    home, index = tmp_path / "home", tmp_path / "i"
    if folder_was_there:
        index.mkdir()
    record_attempt = Ledger.record_attempt

    def interrupted(*args, **kwargs):
        if moment == "ledger":
            record_attempt(*args, **kwargs)
        raise KeyboardInterrupt

    args = ["ingest", "--source", str(corpus), "--index", str(index), "--shard-size", "48", "--executor", "local",
            "--no-dense", "--quiet"]
    with monkeypatch.context() as patch:
        patch.setattr(*((Index, "commit") if moment == "commit" else (Ledger, "record_attempt")), interrupted)
        assert in_process(*args, home=home, monkeypatch=monkeypatch, capsys=capsys).returncode == 130
    assert not (index / "manifest.json").exists()
    staged = sorted(p.name for p in (index / "_ingest").glob("*/*.parquet"))
    assert len(staged) == 3, staged  # 120 documents in shards of 48
    for command in (["index", "info", str(index)], ["run", "bm25", "--index", str(index), "--queries", "bees"]):
        said = in_process(*command, home=home, monkeypatch=monkeypatch, capsys=capsys)
        assert said.returncode == 2 and len(said.stderr.strip().splitlines()) == 1, said.stderr
        assert f"no index at {index} yet: its first ingestion, of {corpus}, was interrupted" in said.stderr
        assert said.stderr.rstrip().endswith("resumes it: " + shlex.join(
            ["tessera", "ingest", "--source", str(corpus), "--index", str(index), "--shard-size", "48", "--no-dense"])
        ), said.stderr
    # in Python, the call that resumes it, not a shell command to translate (a resume without the settings made a
    # dense index of a BM25 one); run as it is said, or the CLI's command
    call = f"flows.api.ingest({str(corpus)!r}, {str(index)!r}, shard_size=48, settings={{'dense': False}})"
    for opening in (lambda: flows.api.Index.open(index), lambda: flows.api.Flow.load("bm25", index=index)):
        with pytest.raises(UnfinishedFirstIngestError) as refusal:
            opening()
        assert refusal.value.message.endswith(f"resumes it: {call}"), refusal.value.message
    if folder_was_there:
        eval(call, {"flows": flows})
    else:
        assert in_process(*args, home=home, monkeypatch=monkeypatch, capsys=capsys).returncode == 0
    doc_ids = Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist()
    assert len(set(doc_ids)) == DOCS and len(doc_ids) == len(Index.open(index))  # each once


@pytest.mark.parametrize("command, call", [
    ("tessera ingest --source 'my docs/a.jsonl' --index /i --no-bm25 --dense-type hnsw --no-chunk --replace",
     "flows.api.ingest('my docs/a.jsonl', '/i', settings={'bm25': False, 'dense_type': 'hnsw'}, chunk=False, "
     "replace=True)"),
    ("""tessera ingest --spec '{"steps": {"read": {"op": "sources.jsonl"}}}' --index /i --shard-size 7""",
     "flows.api.ingest(None, '/i', spec={'steps': {'read': {'op': 'sources.jsonl'}}}, shard_size=7)"),
])
def test_the_python_call_that_resumes_says_each_option_of_the_command(command, call):
    from flows.ingestion.first_ingest import python_call

    assert python_call(command) == call
