"""``tessera ingest --text-field / --id-field / --title-field`` (``ingest(..., fields=...)``): a CSV or JSONL whose
columns are not BEIR's is ingested by naming them. Before, its every file failed ("no text column 'text'") and the
way out was a spec file of the whole ingestion with one param changed. A field option a read step cannot take, a
blank one, and one beside ``--retry-failed`` are refused in one line naming the option. BM25 only, in this process
(``flows.commands.main``, what the script calls)."""

from __future__ import annotations

import json

import pytest

from flows.commands import main
from flows.ingestion import ingest
from flows.ingestion.errors import IngestError

CSV = "id,heading,body,year\n1,Bees,Honey bees make honey from nectar,2020\n2,Ants,Ants farm aphids for honeydew,2021\n"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TESSERA_DEBUG", raising=False)
    (tmp_path / "notes.csv").write_text(CSV)
    return tmp_path


def ingest_cli(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    status = main(["ingest", "--no-dense", "--executor", "local", "--quiet", *args])
    out = capsys.readouterr()
    return status, out.out, out.err


def test_named_fields_ingest_a_csv_whose_columns_are_not_beirs(home, capsys):
    csv = str(home / "notes.csv")
    status, _, err = ingest_cli(capsys, "--source", csv, "--index", "plain")
    assert status != 0 and "no text column 'text'" in err and "tessera ingest --text-field COLUMN" in err
    status, _, err = ingest_cli(capsys, "--source", csv, "--index", "named", "--text-field", "body", "--id-field",
                                "id", "--title-field", "heading")
    assert status == 0, err
    assert main(["index", "documents", "named", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["documents"]
    assert [(d["id"], d["title"], d["metadata"]) for d in listed] == [("1", "Bees", {"year": 2020}),
                                                                     ("2", "Ants", {"year": 2021})]
    assert main(["run", "bm25", "--index", "named", "-q", "nectar", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"][0]["docno"] == "1#0"


def test_the_fields_the_error_names_ingest_the_file_into_the_same_index(home, capsys):
    """The fix the error gives, on the index the failed ingest made: the file was skipped as "recorded as unreadable
    by a finished shard" (every source's read failures were skipped, where a source read with other fields is another
    source), so nothing went in, with --replace too, and the retry refused the fields."""
    csv = str(home / "notes.csv")
    status, _, err = ingest_cli(capsys, "--source", csv, "--index", "same")
    # its last words were only "fix them, then: ... --retry-failed", and a retry read the file as before: no text
    assert status != 0 and err.rstrip().endswith("--retry-failed, or read the source with other fields: this command "
                                                 "again with --text-field COLUMN)"), err
    status, out, err = ingest_cli(capsys, "--source", csv, "--index", "same", "--text-field", "body", "--id-field",
                                  "id", "--json")
    assert status == 0, err
    # the first read's failure of the file is resolved: it said "1 open ... then: --retry-failed", which read the
    # file without --text-field again
    assert json.loads(out)["open_failures"] == 0
    assert main(["index", "documents", "same", "--json"]) == 0
    assert [d["id"] for d in json.loads(capsys.readouterr().out)["documents"]] == ["1", "2"]
    status, out, err = ingest_cli(capsys, "--source", csv, "--index", "same", "--text-field", "body", "--id-field",
                                  "id", "--json")
    report = json.loads(out)  # the same source again: its shard is done, nothing read twice
    assert status == 0 and (report["shards_skipped"], report["docs"], report["failures"]) == (1, 0, 0), err


def test_a_file_the_other_fields_cannot_read_either_stays_an_open_failure(home, capsys):
    csv = str(home / "notes.csv")
    assert ingest_cli(capsys, "--source", csv, "--index", "twice")[0] != 0
    status, out, err = ingest_cli(capsys, "--source", csv, "--index", "twice", "--text-field", "bdy", "--json")
    assert status != 0 and json.loads(out)["open_failures"] == 1, err
    events = [json.loads(line) for line in (home / "home" / "indices" / "twice" / "failures.jsonl").read_text()
              .splitlines()]
    assert "no text column 'bdy'" in events[-2]["error"]  # the second read's own failure, and the first's stays:
    assert not [e for e in events if e["event"] == "retry"]  # neither read resolves the other's failure


@pytest.mark.parametrize("args, said", [
    (["--source", "{home}/docs", "--text-field", "body"],
     "--text-field 'body' is for sources of records (JSONL, CSV/TSV, Parquet); the read step 'sources.files' "
     "reads files whole"),
    (["--source", "{home}/notes.csv", "--text-field", " "], "--text-field must name a field, got ' '"),
])
def test_a_field_a_source_cannot_take_is_refused_naming_the_option(home, capsys, args, said):
    (home / "docs").mkdir()
    (home / "docs" / "a.md").write_text("# A\n\nA note.\n")
    status, _, err = ingest_cli(capsys, *[a.format(home=home) for a in args], "--index", "refused")
    assert status == 2 and len(err.strip().splitlines()) == 1 and said in err, err
    assert not (home / "home" / "indices" / "refused").exists()


def test_a_retry_reads_as_the_source_was_read_and_python_names_the_field(home, capsys):
    assert ingest_cli(capsys, "--source", str(home / "notes.csv"), "--index", "named", "--text-field", "body")[0] == 0
    status, _, err = ingest_cli(capsys, "--index", "named", "--retry-failed", "--text-field", "body")
    assert status == 2 and "field '--text-field': a retry reads its failures as their source was read" in err
    with pytest.raises(IngestError) as refused:
        ingest(home / "notes.csv", home / "py", fields={"body": "text"}, settings={"dense": False},
               executor="local", progress=False)
    assert refused.value.field == "fields"
    assert "'body' is none of id_field, text_field, title_field" in str(refused.value)


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
@pytest.mark.parametrize("option, said", [("--id-field", "no id field 'idd'"),
                                          ("--title-field", "no title field 'ttl'")])
def test_an_id_or_title_field_no_document_has_is_refused_not_left_out(home, capsys, suffix, option, said):
    """It was accepted without a word: the documents got content ids in place of their own, or no title."""
    source = home / f"docs{suffix}"
    if suffix == ".jsonl":
        source.write_text(json.dumps({"_id": "b1", "title": "Bees", "text": "Honey bees make honey"}) + "\n")
    else:
        source.write_text("_id,title,text\nb1,Bees,Honey bees make honey\n")
    status, _, err = ingest_cli(capsys, "--source", str(source), "--index", f"f{suffix[1:]}", option,
                                "idd" if option == "--id-field" else "ttl")
    # the file fails as one without its text column does: exit 1, the file in failures.jsonl (a JSONL file stopped
    # the run, status 2, naming the source's path: a folder's, not the file's)
    assert status == 1 and f"{source}: {said}" in err and "(fields: ['_id', 'text', 'title'])" in err, err
    status, _, err = ingest_cli(capsys, "--source", str(source), "--index", f"ok{suffix[1:]}")  # defaults: as before
    assert status == 0, err


def test_a_jsonl_file_without_the_id_field_named_fails_alone_in_its_folder(home, capsys):
    """The docs' "a failure of that file": the folder's other files are ingested."""
    from operators.store import Index

    folder = home / "docs"
    folder.mkdir()
    (folder / "a.jsonl").write_text(json.dumps({"id": "a1", "text": "Honey bees make honey"}) + "\n")
    (folder / "b.jsonl").write_text(json.dumps({"_id": "b1", "text": "Ants farm aphids"}) + "\n")
    status, _, err = ingest_cli(capsys, "--source", str(folder), "--index", "f", "--id-field", "id")
    assert status == 0, err
    assert Index.open(home / "home" / "indices" / "f").columns(["doc_id"])[1].column("doc_id").to_pylist() == ["a1"]
    [failure] = [json.loads(line) for line in (home / "home" / "indices" / "f" / "failures.jsonl").read_text()
                 .splitlines() if json.loads(line).get("path")]
    assert failure["path"] == str(folder / "b.jsonl") and "no id field 'id'" in failure["error"], failure


def test_a_retry_refuses_a_source_it_would_not_read(home, capsys):
    """``--source X --retry-failed`` retried every open failure of the index, whatever source, and said nothing of
    the --source it ignored."""
    csv = str(home / "notes.csv")
    assert ingest_cli(capsys, "--source", csv, "--index", "notes", "--text-field", "body")[0] == 0
    status, _, err = ingest_cli(capsys, "--source", csv, "--index", "notes", "--retry-failed")
    assert status == 2 and "field '--source'" in err and "leave --source out" in err, err
    assert ingest_cli(capsys, "--index", "notes", "--retry-failed")[0] == 0
