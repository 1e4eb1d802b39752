"""What an audit of ``tessera ingest`` found, on real files in tmp_path (BM25 only, no model loads):
repeated ids, appending to a partial shard, retrying from another directory, a failed run's index folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.ingestion import ingest
from flows.ingestion.errors import SourceChangedError
from flows.ingestion.ledger import Ledger
from operators.store import Index

BM25_ONLY = {"dense": False}


def _doc(doc_id: str, text: str | None = None) -> str:
    return json.dumps({"_id": doc_id, "title": f"Title {doc_id}", "text": text or f"text of document {doc_id}"}) + "\n"


def _ingest(source, index, **kwargs):
    return ingest(source, index, **{"settings": BM25_ONLY, "executor": "local", "chunk": False, "progress": False,
                                    **kwargs})


def _live(index: Path) -> dict[str, str]:
    _, table = Index.open(index).columns(["doc_id", "text"])
    ids, texts = table.column("doc_id").to_pylist(), table.column("text").to_pylist()
    assert len(ids) == len(set(ids)), ids  # never twice
    return dict(zip(ids, texts))


def _open(index: Path):
    return Ledger(index).open_failures(Index.open(index).finished_shards())


def test_repeated_ids_are_one_warning_line_per_file_and_each_copy_stays_in_the_ledger(tmp_path, caplog):
    """50 copies of ids were 10 lines, "... and 40 more" and the count: one line per file now, with the count and
    the first few ids; an unreadable line still has its own line, and each copy is in failures.jsonl."""
    source = tmp_path / "dupes.jsonl"
    source.write_text("".join(_doc(f"d{i}") for i in range(3)) + "".join(_doc(f"d{i % 3}", "copy") for i in range(12))
                      + "not json\n")
    with caplog.at_level("WARNING", logger="tessera.ingest"):
        report = _ingest(source, tmp_path / "idx", shard_size=4)
    lines = [r.getMessage() for r in caplog.records]
    assert report.open_failures == 13 and len(_open(tmp_path / "idx")) == 13
    assert sum("duplicate id" in line or "repeats" in line for line in lines) == 1, lines
    assert f"left out: {source} repeats 12 id(s) of documents before them (d0 at line 4, d1 at line 5, d2 at line " \
           "6, ...): the first copy of each is kept" in lines
    assert any(line.startswith(f"left out: {source}, line 16") for line in lines) and "more" not in " ".join(lines)


@pytest.mark.parametrize("shard_size", [5000, 2])
def test_a_repeated_id_goes_to_the_ledger_and_the_rest_is_ingested(tmp_path, shard_size):
    source = tmp_path / "dupes.jsonl"
    source.write_text(_doc("d1") + _doc("d2") + _doc("d3") + _doc("d2", "second copy") + _doc("d4"))
    report = _ingest(source, tmp_path / "idx", shard_size=shard_size)
    assert (report.docs_total, report.failures, report.open_failures) == (4, 1, 1)
    assert _live(tmp_path / "idx")["d2"] == "text of document d2" and set(_live(tmp_path / "idx")) == {
        "d1", "d2", "d3", "d4"}
    [failure] = _open(tmp_path / "idx")
    assert (failure.stage, failure.path, failure.line) == ("read", str(source), 4)
    assert failure.error == f"duplicate id d2, first at {source}:2"
    again = _ingest(source, tmp_path / "idx", shard_size=shard_size)  # resumes: nothing new, the copy stays out
    assert (again.shards_written, again.open_failures) == (0, 1)
    retried = _ingest(None, tmp_path / "idx", retry_failed=True)  # the id is still live: still a failure
    assert (retried.resolved, retried.open_failures) == (0, 1) and "in the index already" in _open(
        tmp_path / "idx")[0].error


def test_with_replace_the_last_copy_of_a_repeated_id_wins(tmp_path):
    source = tmp_path / "dupes.jsonl"
    source.write_text(_doc("d1") + _doc("d2") + _doc("d2", "second copy") + _doc("d3") + _doc("d2", "third copy"))
    report = _ingest(source, tmp_path / "idx", shard_size=2, replace=True)  # copies in one shard and across shards
    assert report.failures == 0
    assert _live(tmp_path / "idx") == {"d1": "text of document d1", "d2": "third copy", "d3": "text of document d3"}


def test_documents_appended_to_a_partial_shard_are_ingested_once(tmp_path):
    source, index = tmp_path / "app.jsonl", tmp_path / "idx"
    source.write_text(_doc("a1") + _doc("a2") + _doc("a3"))
    assert _ingest(source, index).docs == 3  # one partial shard of the default 5000
    with source.open("a") as f:
        f.write(_doc("a4"))
    second = _ingest(source, index)
    assert (second.docs, second.shards_skipped, second.shards_written) == (1, 1, 1)
    with source.open("a") as f:
        f.write(_doc("a5") + "not json\n" + _doc("a6"))
    third = _ingest(source, index)
    assert (third.docs, third.shards_skipped, third.failures, third.docs_total) == (2, 2, 1, 6)
    assert sorted(_live(index)) == ["a1", "a2", "a3", "a4", "a5", "a6"]
    assert (_ingest(source, index).shards_written, len(_open(index))) == (0, 1)  # nothing staged twice
    shards = sorted(Index.open(index).finished_shards())
    assert [s.rsplit("-", 1)[1] for s in shards] == ["00000", "00000.1", "00000.2"]
    source.write_text(_doc("a1") + _doc("a2", "edited") + _doc("a3") + _doc("a4") + _doc("a5") + _doc("a6"))
    with pytest.raises(SourceChangedError, match="-00000 "):  # a changed row of a finished shard is refused
        _ingest(source, index)


def test_retry_failed_from_another_directory_reads_the_recorded_file(tmp_path, monkeypatch, capsys):
    from flows.commands import main

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    (work / "messy2.jsonl").write_text(_doc("m1") + "{broken\n" + _doc("m3"))
    monkeypatch.chdir(work)
    index = str(tmp_path / "idx")
    common = ["--index", index, "--executor", "local", "--no-dense", "--no-chunk", "--quiet", "--json"]
    assert main(["ingest", "--source", "messy2.jsonl", *common]) == 0
    [failure] = _open(tmp_path / "idx")
    assert failure.path == str(work / "messy2.jsonl")
    (work / "messy2.jsonl").write_text(_doc("m1") + _doc("m2") + _doc("m3"))
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    assert main(["ingest", "--retry-failed", *common]) == 0
    assert json.loads(capsys.readouterr().out)["resolved"] == 1
    assert sorted(_live(tmp_path / "idx")) == ["m1", "m2", "m3"]


def test_retry_of_an_older_ledgers_relative_path_and_of_a_missing_file(tmp_path, monkeypatch, capsys):
    from flows.commands import main

    source = tmp_path / "old.jsonl"
    source.write_text(_doc("o1") + "{broken\n")
    _ingest(source, tmp_path / "idx")
    ledger = tmp_path / "idx" / "failures.jsonl"  # as a ledger written before paths were made absolute
    ledger.write_text(ledger.read_text().replace(str(source), "old.jsonl"))
    assert _open(tmp_path / "idx")[0].path == "old.jsonl"
    source.write_text(_doc("o1") + _doc("o2"))
    monkeypatch.chdir(tmp_path / "idx")  # not where old.jsonl is: found through the staged source's path
    assert _ingest(None, tmp_path / "idx", retry_failed=True).resolved == 1
    source.write_text(_doc("o1") + _doc("o2") + "{broken\n")
    _ingest(source, tmp_path / "idx")
    source.unlink()
    capsys.readouterr()
    assert main(["ingest", "--retry-failed", "--index", str(tmp_path / "idx"), "--executor", "local",
                 "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert str(source) in err and "not there" in err and len(err.splitlines()) == 1, err


def test_a_run_that_fails_while_staging_leaves_no_index_folder(tmp_path, caplog):
    home = tmp_path / "home"
    source = tmp_path / "app.jsonl"
    source.write_text(_doc("a1") + _doc("a2"))
    first = _ingest(source, tmp_path / "idx", shard_size=1)
    source.write_text(_doc("a1", "edited") + _doc("a2"))
    with pytest.raises(SourceChangedError):  # an existing index keeps its folder
        _ingest(source, tmp_path / "idx", shard_size=1)
    assert first.shards_written == 2 and Index.open(tmp_path / "idx").finished_shards()

    import flows.ingestion.job as job

    def broken(self, *args, **kwargs):
        raise RuntimeError("staging broke")

    new = home / "indices" / "fresh"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(job.Stager, "stage", broken)
        with pytest.raises(RuntimeError, match="staging broke"):
            _ingest(source, new)
    assert not new.exists()
    new.mkdir(parents=True)  # a folder that was there before stays, without a manifest
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(job.Stager, "stage", broken)
        with pytest.raises(RuntimeError):
            _ingest(source, new)
    assert new.is_dir() and not (new / "manifest.json").exists()


def test_an_existing_index_says_when_it_keeps_other_settings_than_the_spec_asks(tmp_path, caplog):
    source = tmp_path / "app.jsonl"
    source.write_text(_doc("a1"))
    _ingest(source, tmp_path / "idx")
    spec = {"steps": {"read": {"op": "sources.jsonl", "params": {"path": "x.jsonl"}}},
            "index_settings": {"dense": True, "encoder": "all-MiniLM-L6-v2"}}
    with caplog.at_level("WARNING", logger="tessera.ingest"):
        ingest(source, tmp_path / "idx", spec=spec, settings=None, executor="local", chunk=False, progress=False)
    assert "keeps the settings it was created with" in caplog.text and "dense=True" in caplog.text
    assert Index.open(tmp_path / "idx").settings.dense is False
    caplog.clear()
    more = tmp_path / "more.jsonl"
    more.write_text(_doc("a2"))
    with caplog.at_level("WARNING", logger="tessera.ingest"):  # documents added with the default spec: nothing asked
        ingest(more, tmp_path / "idx", spec="ingest", executor="local", chunk=False, progress=False)
    assert "keeps the settings" not in caplog.text and sorted(_live(tmp_path / "idx")) == ["a1", "a2"]
    caplog.clear()
    german = {"steps": spec["steps"], "index_settings": {"dense": False, "stemmer": "german", "stopwords": "de"}}
    with caplog.at_level("WARNING", logger="tessera.ingest"):  # a language's settings: said too, not ignored
        ingest(more, tmp_path / "idx", spec=german, executor="local", chunk=False, progress=False)
    assert "ask for stemmer='german', stopwords='de', the index has stemmer='english', stopwords='en'" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="tessera.ingest"):  # a retry of failures adds to the index as it is
        ingest(None, tmp_path / "idx", spec=spec, retry_failed=True, executor="local", chunk=False, progress=False)
    assert "keeps the settings" not in caplog.text


def test_an_unreadable_pdf_in_a_folder_goes_to_the_ledger_and_a_retry_reads_it_again(tmp_path, pdf_writer):
    folder = tmp_path / "pdfs"
    folder.mkdir()
    pdf_writer(folder / "good.pdf", ["Kea are alpine parrots of New Zealand."])
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not a PDF")
    report = _ingest(folder, tmp_path / "idx")
    assert (report.docs, report.failures) == (1, 1) and sorted(_live(tmp_path / "idx")) == ["good-p1"]
    [failure] = _open(tmp_path / "idx")
    assert (failure.stage, failure.path) == ("read", str(folder / "broken.pdf"))
    assert "cannot read as a PDF" in failure.error
    assert _ingest(folder, tmp_path / "idx").shards_written == 0  # resumes: the file stays a failure
    pdf_writer(folder / "broken.pdf", ["Takahe are flightless rails."])  # fixed
    retried = _ingest(None, tmp_path / "idx", retry_failed=True)
    assert (retried.resolved, retried.open_failures) == (1, 0)
    assert sorted(_live(tmp_path / "idx")) == ["broken-p1", "good-p1"]


@pytest.mark.parametrize("num_splits", [1, 3])
def test_a_repeated_id_in_a_folder_of_parquet_files_names_its_file_and_row(tmp_path, num_splits):
    """A Parquet copy was 'document 5 of the source'; now its file and row, counted in the file (a row without text
    is a row too), whichever row group or split it is read in."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "pq"
    folder.mkdir()
    first, second = folder / "a.parquet", folder / "b.parquet"
    pq.write_table(pa.table({"_id": ["d1", "d2", "d3"], "text": ["one", "two", "three"]}), first, row_group_size=2)
    pq.write_table(pa.table({"_id": ["d4", "d5", "d6", "d2"], "text": ["four", "", "six", "the copy"]}), second,
                   row_group_size=2)
    index = tmp_path / "idx"
    report = _ingest(str(folder), index, spec={"name": "pq", "steps": {"read": {
        "op": "sources.parquet", "params": {"path": str(folder), "num_splits": num_splits}}}})
    assert (report.docs_total, report.failures) == (5, 1)
    [failure] = _open(index)
    assert failure.error == f"duplicate id d2 ({second} row 4), first at {first} row 2"
    assert failure.record["text"] == "the copy" and failure.path is None
    assert sorted(_live(index)) == ["d1", "d2", "d3", "d4", "d6"]


def test_a_repeated_id_in_a_folder_of_csv_files_names_its_file_and_line_and_a_retry_reads_the_fixed_row(tmp_path):
    """A CSV copy was 'document 4 of the source': in a folder of files, with texts over several lines, the user
    could not find it. Now it is a failure of its file and first line, as in JSONL, and a retry reads that row."""
    folder = tmp_path / "csv"
    folder.mkdir()
    first, second = folder / "a.csv", folder / "b.csv"
    first.write_text('id,text\nd1,"a text\nover two lines"\nd2,plain\n')
    second.write_text('id,text\nd3,three\nd1,"the copy,\nalso over two lines"\n')
    index = tmp_path / "idx"
    report = _ingest(folder, index)
    assert (report.docs_total, report.failures) == (3, 1)
    [failure] = _open(index)
    assert (failure.path, failure.line) == (str(second), 3)
    assert failure.error == f"duplicate id d1, first at {first}:2"
    second.write_text('id,text\nd3,three\nd9,"the copy,\nalso over two lines"\n')  # the user gives it its own id
    retried = _ingest(None, index, retry_failed=True)
    assert (retried.resolved, retried.open_failures) == (1, 0)
    assert _live(index)["d9"] == "the copy,\nalso over two lines"
