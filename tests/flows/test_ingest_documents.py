"""``tessera ingest`` of document files: a folder of PDF, text, Markdown and HTML files is ingested whole (each file
by its kind, ``sources.files``), its other files named in one warning line; a text or Markdown file and a glob of
them are read; a path that is not there says so; and an unfinished ingest (of a spec's read step, of a folder)
prints a command that resumes it. Real files and real ingests (local executor, BM25 only: no model loads), the
command run in this process (``flows.commands.main``, what the console script calls) from ``tmp_path``, or, where
it crashes on purpose or its log is checked, in its own."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from flows.commands import main
from flows.ingestion import ingest
from flows.ingestion.ledger import Ledger
from operators.store import Index

TESSERA = Path(sys.executable).with_name("tessera")


def tessera(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    """``tessera ARGS`` in its own process (for a crash the test provokes, or its log on stderr)."""
    return subprocess.run([str(TESSERA), *args], capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TESSERA_HOME": str(tmp_path / "home"),
                               "COLUMNS": "200", "TESSERA_RAW_STDERR": "1", **env})


@pytest.fixture
def ingest_command(tmp_path, monkeypatch, capsys):
    """A function: ``tessera ingest --source SOURCE`` into ``tmp_path/idx`` (BM25 only), answered as
    ``subprocess.run`` would."""
    monkeypatch.chdir(tmp_path)
    for name, value in {"TESSERA_HOME": str(tmp_path / "home"), "COLUMNS": "200", "TESSERA_RAW_STDERR": "1"}.items():
        monkeypatch.setenv(name, value)

    def run(source: str | Path) -> subprocess.CompletedProcess:
        args = ["ingest", "--source", str(source), "--index", str(tmp_path / "idx"), "--no-dense", "--executor",
                "local", "--quiet"]
        capsys.readouterr()
        status = main(args)
        out = capsys.readouterr()
        return subprocess.CompletedProcess(args, status, out.out, out.err)

    return run


def doc_ids(index: Path) -> list[str]:
    return sorted(set(Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist()))


def search(index: Path, query: str) -> str:
    return Index.open(index).search_bm25([query], k=1)[0].docnos[0]


@pytest.fixture
def docs(tmp_path, pdf_writer) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    pdf_writer(folder / "birds.pdf", ["Kakapo are flightless nocturnal parrots."], title="Birds")
    (folder / "bees.txt").write_text("Honey bees make honey from nectar.\n")
    (folder / "kiwi.md").write_text("# Kiwi\n\nKiwi lay enormous eggs for their size.\n")
    (folder / "weta.html").write_text("<html><head><title>Weta</title><script>var x = 'glaciers';</script></head>"
                                      "<body><p>Giant weta are heavy insects.</p></body></html>")
    (folder / "report.docx").write_bytes(b"PK\x03\x04")
    return folder


@pytest.mark.process
def test_a_folder_of_pdf_text_markdown_and_html_files_is_ingested_whole(tmp_path, docs):
    # its own process: the warning line is the command's log on stderr, set up as the console script sets it up
    done = tessera(tmp_path, "ingest", "--source", str(docs), "--index", str(tmp_path / "idx"), "--no-dense",
                   "--executor", "local", "--quiet")
    assert done.returncode == 0, done.stderr
    assert "4 docs" in done.stdout
    [warning] = done.stderr.strip().splitlines()  # the file nobody reads is named, in one line
    assert warning.startswith(f"tessera: warning: {docs}: 1 file(s) not read") and "report.docx" in warning
    index = tmp_path / "idx"
    assert doc_ids(index) == ["bees.txt", "birds-p1", "kiwi.md", "weta.html"]
    assert search(index, "nectar") == "bees.txt#0" and search(index, "enormous eggs") == "kiwi.md#0"
    assert search(index, "heavy insects") == "weta.html#0" and search(index, "nocturnal parrots") == "birds-p1#0"
    rows = {r["doc_id"]: r for r in Index.open(index).documents(["kiwi.md#0", "weta.html#0"]).to_pylist()}
    assert (rows["kiwi.md"]["title"], rows["kiwi.md"]["path"], rows["weta.html"]["title"]) == ("Kiwi", "kiwi.md",
                                                                                                "Weta")
    assert "glaciers" not in rows["weta.html"]["text"]  # a script is not text


def test_a_text_file_a_markdown_file_and_a_glob_of_them(tmp_path, docs):
    for n, (source, expected) in enumerate([(docs / "bees.txt", ["bees.txt"]), (docs / "kiwi.md", ["kiwi.md"]),
                                            (docs / "*.md", ["kiwi.md"]), (docs / "**" / "*.txt", ["bees.txt"])]):
        report = ingest(str(source), tmp_path / f"idx{n}", settings={"dense": False}, executor="local", chunk=False,
                        progress=False)
        assert (report.docs, report.failures) == (1, 0)
        assert doc_ids(tmp_path / f"idx{n}") == expected


def test_a_source_that_is_not_there_is_named_as_missing(tmp_path, ingest_command):
    done = ingest_command(tmp_path / "nope")
    assert done.returncode == 2 and not (tmp_path / "idx").exists()
    [line] = done.stderr.strip().splitlines()
    assert line == (f"tessera: error: field '--source': cannot read --source '{tmp_path / 'nope'}': no such file or "
                    f"folder (working directory {tmp_path})")


def test_a_file_that_is_not_in_the_encoding_given_is_one_failure_and_the_others_are_ingested(tmp_path, docs):
    (docs / "latin1.txt").write_bytes("caf\u00e9 au lait".encode("latin-1"))
    report = ingest(docs, tmp_path / "idx", settings={"dense": False}, executor="local", chunk=False, progress=False,
                    encoding="utf-8")  # given: no other one is guessed
    assert (report.docs, report.failures) == (4, 1)
    [failure] = Ledger(tmp_path / "idx").open_failures(Index.open(tmp_path / "idx").finished_shards())
    assert failure.path == str(docs / "latin1.txt") and "'latin1.txt' is not UTF-8 text" in failure.error


@pytest.mark.process
def test_an_unfinished_ingest_of_a_spec_read_step_prints_the_command_that_resumes_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    notes = tmp_path / "notes.json"  # JSONL under a name --source refuses: the spec's read step names its reader
    notes.write_text("".join(json.dumps({"_id": f"n{i}", "text": f"note {i} on honey bees"}) + "\n" for i in range(30)))
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"steps:\n  read: {{op: sources.jsonl, params: {{path: {notes}}}}}\n"
                    "  chunk: {op: preprocess.chunk, params: {unit: words, size: 40, overlap: 4}}\n")
    index = tmp_path / "idx"
    crashed = tessera(tmp_path, "ingest", "--spec", str(spec), "--index", str(index), "--shard-size", "10",
                      "--no-dense", "--executor", "local", "--quiet", TESSERA_FAULT="crash_after_write:1")
    assert crashed.returncode == 75, crashed.stderr
    capsys.readouterr()
    assert main(["index", "info", str(index), "--json"]) == 0
    [record] = json.loads(capsys.readouterr().out)["unfinished_ingestions"]
    resume = shlex.split(record["resume"])
    assert resume[:3] == ["tessera", "ingest", "--spec"] and "--source" not in resume
    spec_given = json.loads(resume[3])
    assert spec_given["steps"]["read"] == {"op": "sources.jsonl", "params": {"path": str(notes)}}
    assert spec_given["steps"]["chunk"]["params"] == {"unit": "words", "size": 40, "overlap": 4}
    assert main([*resume[1:], "--executor", "local", "--quiet"]) == 0  # in-process, as the user's command
    assert "(1 already done)" in capsys.readouterr().out and len(doc_ids(index)) == 30
    assert main(["index", "info", str(index), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unfinished_ingestions"] == []


@pytest.mark.process
def test_an_unfinished_ingest_of_a_folder_resumes_with_its_source_and_info_says_it_quietly(tmp_path, capsys,
                                                                                          monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    folder = tmp_path / "csvs"
    folder.mkdir()
    (folder / "a.csv").write_text("_id,text\n" + "".join(f"a{i},row {i} on glaciers\n" for i in range(20)))
    (folder / "README.md").write_text("# What these are\n")
    index = tmp_path / "idx"
    crashed = tessera(tmp_path, "ingest", "--source", str(folder), "--index", str(index), "--shard-size", "10",
                      "--no-dense", "--executor", "local", "--quiet", TESSERA_FAULT="crash_after_write:1")
    assert crashed.returncode == 75 and "README.md" in crashed.stderr, crashed.stderr
    capsys.readouterr()
    assert main(["index", "info", str(index), "--json"]) == 0
    out, err = capsys.readouterr()
    [record] = json.loads(out)["unfinished_ingestions"]
    assert err == ""  # the README is named by the ingest, not by every look at the index
    assert shlex.split(record["resume"])[:4] == ["tessera", "ingest", "--source", str(folder)]
    assert main([*shlex.split(record["resume"])[1:], "--executor", "local", "--quiet"]) == 0
    assert len(doc_ids(index)) == 20


def test_a_text_file_added_to_a_folder_of_pdfs_is_ingested_without_the_pdfs_again(tmp_path, pdf_writer,
                                                                                ingest_command):
    """A folder of PDFs alone is read by ``sources.pdf``, and by ``sources.files`` once it holds a text file too:
    the second ingest adds the new file, and the PDFs' documents, in the index already, stay once."""
    folder = tmp_path / "docs"
    folder.mkdir()
    pdf_writer(folder / "huia.pdf", ["Huia were wattlebirds of the North Island."])
    pdf_writer(folder / "kea.pdf", ["Kea are alpine parrots.", "Kea are curious about cars."])
    first = ingest_command(folder)
    assert first.returncode == 0 and "3 docs" in first.stdout, first.stderr
    (folder / "tui.txt").write_text("Tui sing at dawn in the bush.\n")
    again = ingest_command(folder)
    assert again.returncode == 0, again.stderr  # before: the PDFs' docnos were refused as live already
    assert "1 docs" in again.stdout and "(1 already done)" in again.stdout, again.stdout
    assert doc_ids(tmp_path / "idx") == ["huia-p1", "kea-p1", "kea-p2", "tui.txt"]
    assert len(Index.open(tmp_path / "idx")) == 4  # live chunks: a document each, none twice
    assert search(tmp_path / "idx", "sing at dawn") == "tui.txt#0"


def test_the_resume_spec_embeds_as_the_run_did_without_the_default_specs_title(tmp_path):
    """A run whose spec embedded with a prompt and no title: the resume command's spec must not bring back the
    default spec's ``title_column`` (the resume was refused for other embed params)."""
    from flows.ingestion.job_params import VECTOR_PARAMS
    from flows.ingestion.pending import _resume_spec
    from flows.ingestion.plan import build_plan

    notes = tmp_path / "notes.jsonl"
    notes.write_text(json.dumps({"_id": "n1", "text": "honey"}) + "\n")
    job = {"chunk": {"unit": "words", "size": 40, "overlap": 4},
           "embed": {"model": "all-MiniLM-L6-v2", "prompt": "passage: "}}
    spec = _resume_spec({"source": "sources.jsonl", "params": {"path": str(notes)}}, job)
    embed = spec["steps"]["embed"]["params"]
    assert "title_column" not in embed and embed["prompt"] == "passage: " and embed["model"] == "all-MiniLM-L6-v2"
    plan = build_plan(spec, None, None, quiet=True)
    assert {k: v for k, v in plan.embed.items() if k in VECTOR_PARAMS} == job["embed"]
