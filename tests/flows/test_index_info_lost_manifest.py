"""``tessera index info`` on an index folder whose manifest.json is lost (its shard folders still there) says so in
one line naming a shard, as ``tessera index add`` refuses such a folder (``layout.lost_manifest``), instead of "not
found; build one with tessera ingest" (which refuses that folder too). A folder without shards is still not found.
``tessera`` runs in-process on a real BM25 index of two documents."""

from __future__ import annotations

import json
import os
import shlex

import pytest

from tests.flows.test_cli import assert_one_line_error, tessera_in_process


def test_index_info_names_the_lost_manifest_and_a_shard(tmp_path, monkeypatch, capsys):
    home, index, corpus = tmp_path / "home", tmp_path / "index", tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "d1", "text": "honey bees"}) + "\n"
                      + json.dumps({"_id": "d2", "text": "opera singers"}) + "\n")
    tessera_in_process(monkeypatch, capsys, "index", "add", str(index), str(corpus), "--no-dense", home=home)
    [shard] = [p.name for p in (index / "shards").iterdir()]
    (index / "manifest.json").unlink()
    proc = tessera_in_process(monkeypatch, capsys, "index", "info", str(index), home=home, check=None)
    line = assert_one_line_error(proc, f"{index} holds 1 shard folder(s) but no manifest.json",
                                 f"shards/{shard}", "restore the manifest")
    assert "not found" not in line and "build one" not in line
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_one_line_error(tessera_in_process(monkeypatch, capsys, "index", "info", str(empty), home=home, check=None),
                          "manifest.json not found")


@pytest.mark.parametrize(("files", "entries"), [(["a.txt", "b.md"], "2 entries: a.txt, b.md"),
                                                (["a.txt"], "1 entry: a.txt")])
def test_index_info_on_a_folder_of_documents_says_to_ingest_it_into_another_index(tmp_path, monkeypatch, capsys,
                                                                                  files, entries):
    """It advised `tessera ingest --source FILE --index DOCS`, which refuses that folder ('a folder of other
    files'): the folder is the source, not the index. Its entries are named as `tessera ingest` names them (it
    said `1 entries`, and named none)."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in files:
        (docs / name).write_text("honey bees")
    proc = tessera_in_process(monkeypatch, capsys, "index", "info", str(docs), home=tmp_path / "home", check=None)
    line = assert_one_line_error(proc, f"no index at {docs}: it is a folder of other files ({entries}; no manifest",
                                 f"tessera ingest --source {shlex.quote(str(docs))} --index NAME")
    assert f"--index {docs}`" not in line


def test_a_bare_name_of_an_index_in_the_working_folder_says_to_give_it_as_a_path(tmp_path, monkeypatch, capsys):
    """Ingested as ``--index ./relidx`` and searched as ``--index relidx``: the name was looked up under
    $TESSERA_HOME/indices, and the error advised building an index there."""
    home = tmp_path / "home"
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "d1", "text": "honey bees"}) + "\n")
    here = {"home": home, "cwd": tmp_path}
    tessera_in_process(monkeypatch, capsys, "index", "add", "./relidx", str(corpus), "--no-dense", **here)
    assert (tmp_path / "relidx" / "manifest.json").is_file()
    proc = tessera_in_process(monkeypatch, capsys, "index", "info", "relidx", check=None, **here)
    line = assert_one_line_error(proc, f"no index at {home / 'indices' / 'relidx'}",
                                 "./relidx here is an index", "give it as ./relidx")
    assert "build one" not in line
    assert tessera_in_process(monkeypatch, capsys, "index", "info", "./relidx", **here).returncode == 0


def test_index_info_on_an_interrupted_first_ingest_says_the_command_that_resumes_it(tmp_path, monkeypatch, capsys,
                                                                                      committed_docnos):
    """A first ``tessera ingest`` into an empty folder, stopped by Ctrl-C as its first shard is written, leaves
    ``.lock`` and its staging but no manifest. ``index info`` (and a search) said "manifest.json not found; build one
    with tessera ingest --source FILE", as if nothing had been begun. It now says the ingestion was interrupted and
    gives the command that resumes it, which does, with every document once."""
    import signal

    from flows.ingestion import job

    home, index, corpus = tmp_path / "home", tmp_path / "index", tmp_path / "corpus.jsonl"
    ids = [f"d{i}" for i in range(6)]
    corpus.write_text("".join(json.dumps({"_id": i, "text": f"honey bees {i}"}) + "\n" for i in ids))
    index.mkdir()  # made by the user beforehand: the run keeps the folder when it stops
    real_write = job.write

    def ctrl_c_at_write(*args, **kwargs):  # a Ctrl-C that lands as the first shard is written
        os.kill(os.getpid(), signal.SIGINT)
        return real_write(*args, **kwargs)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal
    try:
        with monkeypatch.context() as patch:
            patch.setattr(job, "write", ctrl_c_at_write)
            stopped = tessera_in_process(monkeypatch, capsys, "ingest", "--source", str(corpus), "--index",
                                         str(index), "--shard-size", "2", "--no-dense", "--quiet", home=home,
                                         check=None)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert stopped.returncode == 130, stopped.stderr
    assert not (index / "manifest.json").exists() and (index / ".lock").exists()
    [staging] = (index / "_ingest").iterdir()  # the settings it was making the index with, for the resume
    assert json.loads((staging / "index_settings.json").read_text())["dense"] is False

    proc = tessera_in_process(monkeypatch, capsys, "index", "info", str(index), home=home, check=None)
    command = shlex.join(["tessera", "ingest", "--source", str(corpus), "--index", str(index), "--shard-size", "2",
                          "--no-dense"])  # a path to paste, quoted where it holds a space
    line = assert_one_line_error(proc, f"no index at {index} yet: its first ingestion, of {corpus}, was interrupted",
                                 f"resumes it: {command}")
    assert "build one" not in line
    resumed = tessera_in_process(monkeypatch, capsys, *shlex.split(command)[1:], home=home, check=None)
    assert resumed.returncode == 0, resumed.stderr
    docnos = committed_docnos(index)
    assert len(docnos) == len(set(docnos)) and {d.rsplit("#", 1)[0] for d in docnos} == set(ids)


def _staged_first_ingest(index, source: dict, settings) -> None:
    """What a first ingestion into ``index`` leaves when stopped before its first commit: the source staged (a real
    ``Stager``), the settings it creates the index with recorded (as ``first_ingest.record_settings`` does), no
    manifest."""
    from flows.ingestion.plan import DEFAULT_SPEC, build_plan
    from flows.ingestion.staging import Stager

    stager = Stager(build_plan(DEFAULT_SPEC, source, None, quiet=True).read, index, 2)
    stager.stage(set())
    (stager.dir / "index_settings.json").write_text(settings.model_dump_json())


def _resume_of(line: str) -> list[str]:
    return shlex.split(line.split("resumes it: ", 1)[1])


def test_the_resume_command_of_an_interrupted_first_ingest_keeps_its_settings_and_reader(tmp_path, monkeypatch,
                                                                                         capsys):
    """The command said for a first ingestion stopped before its first commit was ``--source SOURCE`` with
    ``--shard-size``, ``--no-dense``, ``--no-chunk`` and ``--replace`` alone: a dense-only index (``--no-bm25``) was
    resumed with BM25, and a source a spec's reader read (``sources.jsonl`` for ``notes.json``) got ``--source``,
    which refuses that file. It is now built as an unfinished ingestion's is (``pending.resume_command_of``)."""
    from operators.store import IndexSettings

    home = tmp_path / "home"
    corpus, notes = tmp_path / "corpus.jsonl", tmp_path / "notes.json"
    for path in (corpus, notes):
        path.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"honey bees {i}"}) + "\n" for i in range(3)))
    dense_only = tmp_path / "dense_only"
    _staged_first_ingest(dense_only, {"op": "sources.jsonl", "params": {"path": str(corpus)}},
                         IndexSettings(bm25=False, dense_type="hnsw"))
    proc = tessera_in_process(monkeypatch, capsys, "index", "info", str(dense_only), home=home, check=None)
    line = assert_one_line_error(proc, f"no index at {dense_only} yet: its first ingestion, of {corpus}")
    assert _resume_of(line) == ["tessera", "ingest", "--source", str(corpus), "--index", str(dense_only),
                                "--shard-size", "2", "--dense-type", "hnsw", "--no-bm25"]

    by_spec = home / "indices" / "by_spec"  # listed by `tessera index list`, with the same command
    _staged_first_ingest(by_spec, {"op": "sources.jsonl", "params": {"path": str(notes)}},
                         IndexSettings(dense=False, k1=1.2))
    proc = tessera_in_process(monkeypatch, capsys, "index", "info", str(by_spec), home=home, check=None)
    resume = _resume_of(assert_one_line_error(proc, f"no index at {by_spec} yet: its first ingestion, of {notes}"))
    assert resume[:3] == ["tessera", "ingest", "--spec"] and "--source" not in resume and "--no-dense" in resume
    spec = json.loads(resume[3])
    assert spec["steps"]["read"] == {"op": "sources.jsonl", "params": {"path": str(notes)}}
    assert spec["index_settings"] == {"k1": 1.2}  # no option says it
    [listed] = json.loads(tessera_in_process(monkeypatch, capsys, "index", "list", "--json", home=home).stdout)[
        "indices"]
    assert _resume_of(listed["error"]) == resume


def test_index_open_of_an_interrupted_first_ingest_says_the_call_that_resumes_it(tmp_path, monkeypatch, capsys):
    """``Index.open`` (and ``Flow.load``'s ``index=``) said only that "the command that started it resumes it", where
    the CLI adds that command: a notebook's user got nothing to run. Python now says the ``flows.api.ingest`` call
    that does what the CLI's command does (its settings kept: ``--no-dense`` is ``settings={'dense': False}``)."""
    import pytest

    from flows.api import Flow, Index
    from flows.ingestion.first_ingest import python_call
    from operators.store import IndexSettings
    from operators.store.errors import UnfinishedFirstIngestError

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    corpus, index = tmp_path / "corpus.jsonl", tmp_path / "index"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": f"honey bees {i}"}) + "\n" for i in range(3)))
    _staged_first_ingest(index, {"op": "sources.jsonl", "params": {"path": str(corpus)}}, IndexSettings(dense=False))
    said = []
    for opening in (lambda: Index.open(index), lambda: Index(str(index)), lambda: Flow.load("bm25", index=index)):
        with pytest.raises(UnfinishedFirstIngestError) as err:
            opening()
        assert err.value.message.startswith(f"no index at {index} yet: its first ingestion, of {corpus}")
        assert "resumes it: flows.api.ingest(" in err.value.message
        said.append(err.value.message.split("resumes it: ", 1)[1])
    line = assert_one_line_error(tessera_in_process(monkeypatch, capsys, "index", "info", str(index),
                                                    home=tmp_path / "home", check=None), "resumes it: ")
    assert _resume_of(line) == ["tessera", "ingest", "--source", str(corpus), "--index", str(index), "--shard-size",
                                "2", "--no-dense"]
    assert said == [python_call(line.split("resumes it: ", 1)[1].strip())] * 3
    assert "shard_size=2" in said[0] and "settings={'dense': False}" in said[0]
