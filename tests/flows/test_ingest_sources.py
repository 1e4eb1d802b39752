"""What ``tessera ingest --source`` reads: the source operator by suffix (a file or a glob) or by the files a folder
holds; a name of no known type, or a folder of none or of two record formats, refused in one line that lists the
formats, before any index is made. End to end, BM25 only (no model): a TSV, a gzipped CSV, a folder of CSVs, PDFs of one
name in two folders, and a JSONL file with empty ids."""

from __future__ import annotations

import gzip
import json
import logging
import subprocess
from pathlib import Path

import pytest

from flows.commands import main
from flows.ingestion import build_plan, ingest
from flows.ingestion.errors import IngestError
from operators.ids import content_doc_id
from operators.store import Index

BM25_ONLY = {"dense": False}


def read_step(source) -> tuple[str, dict]:
    op = build_plan(None, str(source), False).read
    return op.name, op.params.model_dump()


def test_the_reader_follows_the_suffix(tmp_path):
    cases = {"a.jsonl": ("sources.jsonl", None), "a.jsonl.gz": ("sources.jsonl", None),
             "a.ndjson": ("sources.jsonl", None), "a.parquet": ("sources.parquet", None),
             "a.csv": ("sources.csv", ","), "a.CSV.gz": ("sources.csv", ","), "a.tsv": ("sources.csv", "\t"),
             "a.tsv.gz": ("sources.csv", "\t"), "a.pdf": ("sources.pdf", None), "docs/**/*.pdf": ("sources.pdf", None),
             "a.txt": ("sources.files", None), "a.md": ("sources.files", None), "a.HTML": ("sources.files", None),
             "docs/*.md": ("sources.files", None), "docs/**/*": ("sources.files", None)}
    (tmp_path / "docs").mkdir()
    for name, (op, delimiter) in cases.items():
        if "*" not in name:
            (tmp_path / name).write_text("")
        got, params = read_step(tmp_path / name)
        assert (got, params.get("delimiter")) == (op, delimiter), name


@pytest.mark.parametrize("name", ["corpus.json", "README", "notes.docx", "docs/*.json"])
def test_a_name_of_no_known_type_is_refused_listing_the_formats(tmp_path, name):
    if "*" not in name:
        (tmp_path / name).write_text("x")
    with pytest.raises(IngestError) as err:
        build_plan(None, str(tmp_path / name), False)
    message = str(err.value)
    assert "its type is not known from its suffix" in message and "\n" not in message
    for fmt in ("JSONL (.jsonl", "Parquet (.parquet", "CSV (.csv, .csv.gz)", "TSV (.tsv, .tsv.gz)", "PDF (.pdf)",
                "text (.txt)", "Markdown (.md, .markdown)", "HTML (.html, .htm)", "BEIR folder",
                "read: {op: sources.jsonl"):
        assert fmt in message
    assert err.value.field == "source"


@pytest.mark.parametrize("name", ["nope", "notes.md", "corpus.jsonl", "gone/"])
def test_a_path_that_is_not_there_is_refused_saying_so(tmp_path, name):
    with pytest.raises(IngestError, match=r"cannot read source='.*': no such file or folder \(working directory "):
        build_plan(None, str(tmp_path / name), False)


@pytest.mark.parametrize("pattern", ["docs/*.jsonl", "docs/**/*.md", "docs/*", "nowhere/*.csv"])
def test_a_glob_that_matches_no_file_is_named_as_the_source_option(tmp_path, monkeypatch, capsys, pattern):
    """The read step's own error said "step 'read', operator 'sources.jsonl', field 'params.path': no file matches
    ...", naming a param of a spec the user never wrote; the command's other refusals of --source name it."""
    (tmp_path / "docs" / "sub").mkdir(parents=True)  # folders alone: no file to read
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    assert main(["ingest", "--source", pattern, "--index", "idx", "--no-dense", "--quiet"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"tessera: error: field '--source': cannot read --source '{pattern}': no file matches it (working directory "
        f"{tmp_path})"]
    assert not (tmp_path / "home" / "indices" / "idx").exists()


@pytest.mark.parametrize("pattern", ["docs/*.jsonl", "docs/**/*.md", "docs/*", "nowhere/*.csv"])
def test_a_glob_that_matches_no_file_is_an_ingest_error_on_source_in_python_too(tmp_path, monkeypatch, pattern):
    """``flows.api.ingest`` raised the read step's ``SourceNotFoundError`` (step 'read', operator 'sources.jsonl',
    field 'params.path'), which no ``except IngestError`` caught, where ``tessera ingest`` names ``--source``."""
    from flows.api import ingest

    (tmp_path / "docs" / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(IngestError) as err:
        ingest(pattern, tmp_path / "idx", settings={"dense": False}, progress=False)
    assert err.value.field == "source"
    assert err.value.message == f"cannot read source='{pattern}': no file matches it (working directory {tmp_path})"
    assert not (tmp_path / "idx").exists()


def test_a_folder_is_read_by_the_one_kind_of_file_it_holds(tmp_path, caplog):
    csvs, tsvs, beir, mixed, none = (tmp_path / n for n in ("csvs", "tsvs", "beir", "mixed", "none"))
    for folder in (csvs, tsvs, beir, mixed, none):
        folder.mkdir()
    (csvs / "a.csv").write_text("_id,text\n1,x\n")
    (csvs / "notes.md").write_text("# not read")
    (csvs / "b.jsonl.bak").write_text("{}")
    (tsvs / "a.tsv").write_text("_id\ttext\n1\tx\n")
    (beir / "corpus.jsonl").write_text('{"_id": "1", "text": "x"}\n')
    (mixed / "a.csv").write_text("_id,text\n1,x\n")
    (mixed / "b.jsonl").write_text('{"_id": "1", "text": "x"}\n')
    (none / "notes.docx").write_text("not read")
    (none / "sub").mkdir()
    (none / "sub" / "a.csv").write_text("_id,text\n1,x\n")
    caplog.set_level(logging.WARNING, logger="tessera.ingest")
    assert read_step(csvs)[0] == "sources.csv" and read_step(csvs)[1]["delimiter"] == ","
    # a folder's other files are named in one line (a README beside a CSV corpus is not refused)
    assert caplog.messages[0] == f"{csvs}: 2 file(s) not read (another kind than the folder's): b.jsonl.bak, notes.md"
    assert read_step(tsvs)[1]["delimiter"] == "\t"
    assert read_step(beir)[0] == "sources.beir"
    with pytest.raises(IngestError, match=r"holds CSV and JSONL files; give a glob of one kind \('.*mixed/\*\.csv'\)"):
        read_step(mixed)
    with pytest.raises(IngestError, match=r"holds no file of a known type \(subfolders are not read"):
        read_step(none)


def test_a_beir_folder_is_one_with_its_corpus_and_names_the_users_files_beside_it(tmp_path, caplog):
    """``corpus.jsonl*`` made a folder a BEIR folder: one of notes with an editor's ``corpus.jsonl.bak`` in it was
    refused by the BEIR reader ("step 'read', operator 'sources.beir' ...: has no corpus.jsonl"); and the notes or
    records beside a real corpus were left out without a word."""
    sample = [json.loads(line) for line, _ in zip(open(Path(__file__).resolve().parents[2] / "data" / "sample" /
                                                        "corpus.jsonl", encoding="utf-8"), range(3))]
    notes, beir = tmp_path / "notes", tmp_path / "beir"
    for folder in (notes, beir):
        folder.mkdir()
        (folder / "kea.md").write_text("# Kea\n\nKea are alpine parrots of New Zealand.\n")
    (notes / "corpus.jsonl.bak").write_text(json.dumps(sample[0]) + "\n")
    (beir / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in sample))
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "parrots"}\n')
    (beir / "extra.csv").write_text("_id,text\nx,Everest\n")
    caplog.set_level(logging.WARNING, logger="tessera.ingest")
    index = ingest(str(notes), tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert Index.open(index.index).columns(["doc_id"])[1].column("doc_id").to_pylist() == ["kea.md"]
    caplog.clear()
    assert read_step(beir)[0] == "sources.beir"
    assert caplog.messages == [f"{beir}: a BEIR folder, of which only corpus.jsonl is read: 2 other file(s) not "
                               "read: extra.csv, kea.md (ingest them as a source of their own, a glob of them)"]


def test_a_folder_of_notes_beside_a_csv_export_is_refused_naming_both_globs(tmp_path):
    """A folder of a user's notes with one spreadsheet export in it was read as the CSV: its 3 rows were ingested and
    the notes left out, named in a warning. Where documents outnumber the record files, the folder is refused, before
    any index is made, with the glob of each; the documents' glob reads them all."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "kea.md").write_text("# Kea\n\nKea are alpine parrots of New Zealand.\n")
    (notes / "huia.txt").write_text("Huia were wattlebirds.")
    (notes / "tui.html").write_text("<html><head><title>Tui</title></head><body><p>Tui sing.</p></body></html>")
    (notes / "people.csv").write_text("_id,text\np1,Einstein\np2,Curie\n")
    with pytest.raises(IngestError) as err:
        ingest(str(notes), tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (f"the folder holds 3 document file(s) and CSV records beside them; give a glob of the files to read "
            f"('{notes}/*.csv' for the CSV records, or '{notes}/*' for its 3 PDF, text, Markdown and HTML files)"
            in str(err.value))
    assert not (tmp_path / "idx").exists()
    (notes / "places.jsonl").write_text('{"_id": "x", "text": "Everest"}\n')  # two record formats: both globs too
    with pytest.raises(IngestError, match=r"holds CSV and JSONL files; give a glob of one kind \('.*notes/\*\.csv', "
                       r"or '.*notes/\*' for its 3 PDF, text, Markdown and HTML files\)"):
        read_step(notes)
    report = ingest(str(notes / "*"), tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False,
                    progress=False)
    assert (report.docs, report.failures) == (3, 0)
    assert Index.open(tmp_path / "idx").search_bm25(["alpine parrots"], k=1)[0].docnos == ["kea.md"]


def test_a_spec_read_steps_params_stay_and_the_suffix_sets_the_delimiter(tmp_path):
    spec = {"steps": {"read": {"op": "sources.csv", "params": {"path": "x.csv", "text_field": "body"}}}}
    (tmp_path / "a.tsv").write_text("_id\tbody\n1\tx\n")
    op = build_plan(spec, str(tmp_path / "a.tsv"), False).read
    assert (op.params.text_field, op.params.delimiter) == ("body", "\t")


def test_a_tsv_and_a_gzipped_csv_are_ingested(tmp_path):
    tsv = tmp_path / "docs.tsv"
    tsv.write_text("_id\ttitle\ttext\nd1\tIce\tglaciers, moving slowly\nd2\tRivers\trivers flow to the sea\n")
    report = ingest(tsv, tmp_path / "tsv", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (2, 0)
    assert Index.open(tmp_path / "tsv").search_bm25(["glaciers"], k=1)[0].docnos == ["d1"]
    gz = tmp_path / "docs.csv.gz"
    with gzip.open(gz, "wt") as f:
        f.write('_id,title,text\nc1,Ice,"glaciers, moving"\nc2,,\n')
    report = ingest(gz, tmp_path / "gz", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert report.docs == 1  # the row with neither a text nor a title is no document
    assert Index.open(tmp_path / "gz").search_bm25(["glaciers"], k=5)[0].docnos == ["c1"]


def test_pdfs_of_one_name_in_two_folders_are_two_documents(tmp_path, pdf_writer):
    for folder, text in (("a", "Kea are alpine parrots of the mountains."), ("b", "Huia were wattlebirds.")):
        (tmp_path / "pdfs" / folder).mkdir(parents=True)
        pdf_writer(tmp_path / "pdfs" / folder / "report.pdf", [text])
    report = ingest(str(tmp_path / "pdfs" / "**" / "*.pdf"), tmp_path / "idx", settings=BM25_ONLY,
                    executor="local", chunk={"unit": "tokens", "size": 48, "overlap": 8}, progress=False)
    assert (report.docs, report.failures) == (2, 0)
    index = Index.open(tmp_path / "idx")
    hit = index.search_bm25(["alpine parrots"], k=1)[0].docnos[0]
    row = index.documents([hit]).to_pylist()[0]
    assert (hit, row["path"], row["page"]) == ("a/report-p1#0", "a/report.pdf", 1)


def test_empty_ids_get_content_ids(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        {"_id": "", "title": "Ice", "text": "glaciers move slowly"},
        {"_id": " ", "title": "Rivers", "text": "rivers flow"}]))
    ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    index = Index.open(tmp_path / "idx")
    assert sorted(index.columns(["doc_id"])[1].column("doc_id").to_pylist()) == sorted(
        [content_doc_id("Ice", "glaciers move slowly"), content_doc_id("Rivers", "rivers flow")])


@pytest.fixture
def ingest_command(tmp_path, monkeypatch, capsys, caplog):
    """A function: ``tessera ingest`` of ``source`` into ``tmp_path/idx`` (BM25 only), answered as ``subprocess.run``
    would. The command runs in this process (``flows.commands.main``, what the console script calls, from
    ``tmp_path``), without a second of imports in a process of its own; what it logs at WARNING or above is added to
    its stderr, as Python's last-resort handler writes it there in a process of its own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "200")

    def run(source: Path) -> subprocess.CompletedProcess:
        args = ["ingest", "--source", str(source), "--index", str(tmp_path / "idx"), "--no-dense", "--executor",
                "local", "--quiet"]
        capsys.readouterr()
        caplog.clear()
        status = main(args)
        out = capsys.readouterr()
        logged = "".join(f"{r.getMessage()}\n" for r in caplog.records if r.levelno >= logging.WARNING)
        return subprocess.CompletedProcess(args, status, out.out, out.err + logged)

    return run


def test_the_command_refuses_an_unknown_type_in_one_line_and_makes_no_index(tmp_path, ingest_command):
    notes = tmp_path / "notes.json"
    notes.write_text('{"text": "Glaciers move."}')
    done = ingest_command(notes)
    assert done.returncode != 0 and not (tmp_path / "idx").exists()
    [line] = done.stderr.strip().splitlines()
    assert "notes.json" in line and "its type is not known from its suffix" in line


def test_a_jsonl_record_with_an_empty_text_goes_to_the_failure_ledger(tmp_path):
    from flows.ingestion.ledger import Ledger

    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [
        {"_id": "a", "title": "Ice", "text": "glaciers move slowly"}, {"_id": "b", "title": " ", "text": ""},
        {"_id": "c", "text": None}, {"_id": "d", "text": " \n "}, {"_id": "e", "title": "Lakes", "text": ""}]))
    report = ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (2, 3)  # e: a title alone is a document
    assert Index.open(tmp_path / "idx").search_bm25(["lakes"], k=1)[0].docnos == ["e"]
    failures = Ledger(tmp_path / "idx").open_failures(Index.open(tmp_path / "idx").finished_shards())
    assert [(f.line, f.error.split(" (")[0]) for f in failures] == [(2, "empty text"), (3, "empty text"),
                                                                     (4, "empty text")]


def test_a_run_whose_every_document_failed_exits_non_zero_saying_so(tmp_path, ingest_command):
    path = tmp_path / "broken.jsonl"
    path.write_text('{"_id": "a", "text": ""}\nnot json\n[1, 2]\n')
    done = ingest_command(path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "tessera: error: no document was ingested: all 3 failed" in done.stderr


def test_a_folders_files_are_read_whatever_the_case_of_their_suffix(tmp_path):
    """A folder's ``EXPORT.CSV`` (as old Windows tools name it) beside ``b.csv`` was left out without a word: the
    folder was read as CSV by its suffix, any case, but the reader listed ``*.csv`` alone; a folder of ``EXPORT.CSV``
    alone was "holds no .csv files", and ``OLD.CSV.GZ`` was not read as gzip."""
    for name in ("records", "alone"):
        (tmp_path / name).mkdir()
    (tmp_path / "records" / "EXPORT.CSV").write_text("_id,text\nu1,Kea are alpine parrots.\n")
    (tmp_path / "records" / "b.csv").write_text("_id,text\nu2,Huia were wattlebirds.\n")
    (tmp_path / "records" / "OLD.CSV.GZ").write_bytes(gzip.compress(b"_id,text\nz1,Tui sing at dawn.\n"))
    (tmp_path / "alone" / "DATA.JSONL").write_text('{"_id": "j1", "text": "Moa were flightless."}\n')
    for name, ids in (("records", ["u1", "u2", "z1"]), ("alone", ["j1"])):
        done = ingest(str(tmp_path / name), tmp_path / f"idx-{name}", settings=BM25_ONLY, executor="local",
                      chunk=False, progress=False)
        assert sorted(Index.open(done.index).columns(["doc_id"])[1].column("doc_id").to_pylist()) == ids
