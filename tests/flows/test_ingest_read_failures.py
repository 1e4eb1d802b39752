"""Records and files that cannot be read go to the failure ledger with their file and line, and the rest of the
corpus is ingested (``flows/ingestion/records.py``): bad CSV rows, a broken gzip or Parquet file, a CSV without its
text column. Real files in tmp_path, BM25 only (no model loads), through ``ingest`` and ``tessera ingest``."""

from __future__ import annotations

import shlex
import gzip
import os
import json
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from flows.ingestion import ingest
from flows.ingestion.ledger import Ledger
from operators.sources.csv_rows import QUOTES_AS_TEXT
from operators.store import Index

BM25_ONLY = {"dense": False}
HEADER = "_id,title,text\n"


def _ingest(source, index, **kwargs):
    return ingest(source, index, **{"settings": BM25_ONLY, "executor": "local", "chunk": False, "progress": False,
                                    **kwargs})


def _live(index: Path) -> list[str]:
    ids = Index.open(index).columns(["doc_id"])[1].column("doc_id").to_pylist()
    assert len(ids) == len(set(ids)), ids
    return sorted(ids)


def _open(index: Path) -> dict[str, tuple[int | None, str]]:
    """Open failures by file name: (line, error)."""
    failures = Ledger(index).open_failures(Index.open(index).finished_shards())
    return {f"{Path(f.path).name}:{f.line}" if f.line else Path(f.path).name: f.error for f in failures}


def _bad_csvs(folder: Path) -> None:
    folder.mkdir()
    (folder / "a.csv").write_text(HEADER + 'a1,T,first\na2,T,"a quote never closed\na3,T,after it\n')
    (folder / "b.csv").write_text(HEADER + "b1,T,first\nb2,T,one field,too many\nb3,T,\"quoted, \nover two lines\"\n"
                                  "b4,T,last\n")
    (folder / "c.csv").write_bytes((HEADER + "c1,T,first\nc2,T,latin-1 caf").encode() + b"\xe9\nc3,T,last\n")
    (folder / "d.csv").write_text(HEADER + "d1,T,all good\n")


def test_bad_csv_rows_are_failures_of_their_file_and_line_and_the_rest_is_ingested(tmp_path):
    folder = tmp_path / "csvs"
    _bad_csvs(folder)
    report = _ingest(folder, tmp_path / "idx", shard_size=2, encoding="utf-8")  # given: c.csv's é is not guessed
    assert (report.docs, report.failures) == (8, 3)
    assert _live(tmp_path / "idx") == ["a1", "a3", "b1", "b3", "b4", "c1", "c3", "d1"]
    failures = _open(tmp_path / "idx")
    assert failures == {
        "a.csv:3": "a quote opened on line 3 is never closed (the file ends inside it)" + QUOTES_AS_TEXT,
        "b.csv:3": "4 field(s) where the header has 3 (_id, title, text)",
        "c.csv:3": "not valid UTF-8 (byte 0xe9 at byte 17 of line 3); give the file's encoding (the encoding param, "
                   "tessera ingest --encoding)",
    }
    [raw] = [f.raw for f in Ledger(tmp_path / "idx").open_failures(Index.open(tmp_path / "idx").finished_shards())
             if f.path.endswith("b.csv")]
    assert raw == "b2,T,one field,too many"
    (folder / "a.csv").write_text(HEADER + 'a1,T,first\na2,T,"a quote, closed"\na3,T,after it\n')  # fixed
    (folder / "b.csv").write_text(HEADER + "b1,T,first\nb2,T,\"one field, quoted\"\nb3,T,\"quoted, \n"
                                  "over two lines\"\nb4,T,last\n")
    again = _ingest(folder, tmp_path / "idx", shard_size=2, encoding="utf-8")  # a fixed row enters by a retry,
    # not by a re-run
    assert (again.shards_written, again.open_failures) == (0, 3)
    retried = _ingest(None, tmp_path / "idx", retry_failed=True)
    assert (retried.docs, retried.resolved, retried.open_failures) == (2, 2, 1)
    assert (retried.docs_total, retried.shards_total, retried.shards_written, retried.shards_skipped) == (3, 1, 1, 0)
    assert {"a2", "b2"} <= set(_live(tmp_path / "idx")) and list(_open(tmp_path / "idx")) == ["c.csv:3"]
    text = dict(zip(*Index.open(tmp_path / "idx").columns(["doc_id", "text"])[1].to_pydict().values()))
    assert (text["a2"], text["b3"]) == ("a quote, closed", "quoted, \nover two lines")


def test_the_cli_names_the_file_and_line_and_fails_only_when_nothing_was_ingested(tmp_path, capsys, caplog):
    from flows.commands import main

    folder = tmp_path / "csvs"
    _bad_csvs(folder)
    command = ["ingest", "--index", str(tmp_path / "idx"), "--executor", "local", "--no-dense", "--no-chunk",
               "--quiet", "--encoding", "utf-8"]
    with caplog.at_level("WARNING", logger="tessera.ingest"):  # a warning on stderr, outside pytest
        assert main([*command, "--source", str(folder)]) == 0
    assert f"left out: {folder / 'b.csv'}, line 3: 4 field(s) where the header has 3" in caplog.text
    assert "3 record(s) of the source are left out, the rest goes on" in caplog.text
    assert "3 document(s) failed in this run; 3 open" in capsys.readouterr().out
    broken = tmp_path / "broken.csv"
    broken.write_text(HEADER + 'x1,T,"never closed\nx2,T,one,two\n')
    caplog.clear()
    with caplog.at_level("WARNING", logger="tessera.ingest"):
        assert main(["ingest", "--index", str(tmp_path / "idx2"), *command[3:], "--source", str(broken)]) == 1
    assert "2 record(s) of the source are left out, and the source has no other document;" in caplog.text  # not
    assert "the rest goes on" not in caplog.text  # "the rest goes on", where nothing else was there to go on
    err = capsys.readouterr().err  # an error line on stderr, its command to paste on one line
    assert f"tessera: error: no document was ingested: all 2 failed (the first: {broken}, line 2: " in err
    assert f"; why: {tmp_path / 'idx2'}/failures.jsonl; fix them, then: tessera ingest --index " \
        f"{shlex.quote(str(tmp_path / 'idx2'))} --retry-failed)\n" in err  # a command to paste: quoted


def test_a_value_that_does_not_fit_its_column_is_a_failure_of_its_row(tmp_path):
    source = tmp_path / "typed.csv"
    source.write_text("_id,text,year\n" + "".join(f"y{i},text {i},{1990 + i}\n" for i in range(4))
                      + "y4,text 4,unknown\ny5,text 5,1995\n")
    read = {"op": "sources.csv", "params": {"path": str(source), "batch_rows": 2}}  # types from the first 2 rows
    report = _ingest(read, tmp_path / "idx")
    assert (report.docs, report.failures) == (5, 1)
    [(where, error)] = _open(tmp_path / "idx").items()
    assert where == "typed.csv:6" and "invalid value 'unknown'" in error and "int64" in error


def test_a_csv_file_that_cannot_be_read_is_a_failure_of_the_file(tmp_path):
    folder = tmp_path / "csvs"
    folder.mkdir()
    (folder / "good.csv").write_text(HEADER + "g1,T,good\n")
    (folder / "body.csv").write_text("_id,body\nb1,no text column\n")
    (folder / "zipped.csv.gz").write_bytes(b"not gzip data")
    report = _ingest(folder, tmp_path / "idx")
    assert (report.docs, report.failures) == (1, 2) and _live(tmp_path / "idx") == ["g1"]
    failures = _open(tmp_path / "idx")
    assert failures["body.csv"] == f"{folder / 'body.csv'}: no text column 'text' (columns: '_id', 'body'); " \
                                   "name the column that holds the text: tessera ingest --text-field COLUMN (in " \
                                   "Python, ingest(..., fields={'text_field': COLUMN}); in a spec, the read step's " \
                                   "param: {op: sources.csv, params: {..., text_field: COLUMN}})"
    assert "BadGzipFile" in failures["zipped.csv.gz"]
    (folder / "body.csv").write_text(HEADER + "b1,T,now it has one\nb2,T,\"bad\n")
    (folder / "zipped.csv.gz").write_bytes(gzip.compress((HEADER + "z1,T,zipped\n").encode()))
    retried = _ingest(None, tmp_path / "idx", retry_failed=True)
    assert (retried.resolved, retried.open_failures) == (2, 1)  # the file is in; its bad row is a failure of its own
    assert _live(tmp_path / "idx") == ["b1", "g1", "z1"] and list(_open(tmp_path / "idx")) == ["body.csv:3"]


def test_a_broken_gzip_among_jsonl_files_is_a_failure_and_a_cut_one_keeps_its_first_lines(tmp_path):
    folder = tmp_path / "jsonl"
    folder.mkdir()
    (folder / "a.jsonl").write_text(json.dumps({"_id": "a1", "text": "plain"}) + "\n")
    (folder / "b.jsonl.gz").write_bytes(b"not gzip data")
    lines = "".join(json.dumps({"_id": f"c{i}", "text": f"line {i} " + "x" * 40}) + "\n" for i in range(3000))
    whole = gzip.compress(lines.encode())
    (folder / "c.jsonl.gz").write_bytes(whole[: len(whole) // 2])  # cut short
    report = _ingest(folder, tmp_path / "idx")
    failures = _open(tmp_path / "idx")
    assert "BadGzipFile" in failures.pop("b.jsonl.gz")
    [(where, error)] = failures.items()
    cut = int(where.split(":")[1])
    assert 1 < cut < 3000 and error.startswith(f"cannot read the file from line {cut} on (EOFError")
    assert report.docs == 1 + cut - 1 and "a1" in _live(tmp_path / "idx")
    (folder / "b.jsonl.gz").write_bytes(gzip.compress(b'{"_id": "b1", "text": "fixed"}\n{"_id": "b2"}\n'))
    retried = _ingest(None, tmp_path / "idx", retry_failed=True)
    assert retried.resolved == 1 and "b1" in _live(tmp_path / "idx")
    assert _open(tmp_path / "idx")["b.jsonl.gz:2"].startswith("no field 'text'")


def test_a_broken_parquet_file_is_a_failure_and_the_others_are_ingested(tmp_path):
    folder = tmp_path / "pq"
    folder.mkdir()
    pq.write_table(pa.table({"_id": ["p1"], "text": ["good"]}), folder / "a.parquet")
    (folder / "b.parquet").write_bytes(b"PAR1 not parquet")
    report = _ingest(folder, tmp_path / "idx")
    assert (report.docs, report.failures) == (1, 1)
    assert "cannot read as Parquet" in _open(tmp_path / "idx")["b.parquet"]
    pq.write_table(pa.table({"_id": ["p2"], "text": ["fixed"]}), folder / "b.parquet")
    retried = _ingest(None, tmp_path / "idx", retry_failed=True)
    assert (retried.resolved, retried.open_failures) == (1, 0) and _live(tmp_path / "idx") == ["p1", "p2"]


def test_a_retry_reports_the_shards_it_made_one_per_source(tmp_path, capsys):
    """``--retry-failed`` said ``shards_total: 0, shards_written: 1``: its shards were never counted in the total.
    Failures of two sources retry into two shards, and a retry with nothing open makes none."""
    from flows.commands import main

    first, second = tmp_path / "first.csv", tmp_path / "second.csv"
    first.write_text(HEADER + 'f1,T,first\nf2,T,"never closed\n')
    second.write_text(HEADER + "s1,T,first\ns2,T,one,two\n")
    for source in (first, second):
        assert _ingest(source, tmp_path / "idx").failures == 1
    first.write_text(HEADER + 'f1,T,first\nf2,T,"closed"\n')
    second.write_text(HEADER + 's1,T,first\ns2,T,"one,two"\n')
    command = ["ingest", "--index", str(tmp_path / "idx"), "--executor", "local", "--no-dense", "--no-chunk",
               "--quiet", "--retry-failed", "--json"]
    capsys.readouterr()
    assert main(command) == 0
    report = json.loads(capsys.readouterr().out)
    counts = ("docs_total", "docs", "shards_total", "shards_written", "shards_skipped", "resolved", "open_failures")
    assert {k: report[k] for k in counts} == dict(zip(counts, (2, 2, 2, 2, 0, 2, 0)))
    assert _live(tmp_path / "idx") == ["f1", "f2", "s1", "s2"]
    assert main(command) == 0
    report = json.loads(capsys.readouterr().out)
    assert {k: report[k] for k in counts} == dict(zip(counts, (0, 0, 0, 0, 0, 0, 0)))


def test_a_file_whose_name_is_not_utf8_is_a_failure_saying_so_and_the_folder_is_ingested(tmp_path):
    """Writing its failure to the ledger raised UnicodeEncodeError (the name's byte 0xe9 read as a surrogate), so the
    folder's other files were never committed, on every run."""
    folder = tmp_path / "texts"
    folder.mkdir()
    (folder / "bees.txt").write_text("Bees make honey.")
    name = os.fsdecode(b"caf\xe9.txt")  # a Latin-1 name
    (folder / name).write_text("Coffee.")
    report = _ingest(folder, tmp_path / "idx")
    assert (report.docs, report.failures) == (1, 1)
    assert _live(tmp_path / "idx") == ["bees.txt"]
    assert _open(tmp_path / "idx") == {name: f"{folder}/caf\\xe9.txt: its name is not UTF-8, which a document's path "
                                             "must be: rename the file (convmv -f latin1 -t utf8 --notest FILE renames "
                                             "a Latin-1 name) and ingest again"}  # the name's byte, written out
    (tmp_path / "idx" / "failures.jsonl").read_bytes().decode("utf-8")  # the ledger stays UTF-8
    os.rename(folder / name, folder / "cafe.txt")  # renamed as it says: the retry reads it from its old name, gone
    assert _ingest(folder, tmp_path / "idx").shards_written == 1 and "cafe.txt" in _live(tmp_path / "idx")


def test_a_lone_surrogate_in_a_jsonl_line_is_a_failure_of_that_line_and_the_rest_is_ingested(tmp_path):
    """JSON may escape a lone surrogate ("\\ud800"), which UTF-8 and Arrow cannot hold: before, one such line in the
    corpus ended the whole ingest with an internal UnicodeEncodeError, and no document was stored."""
    source = tmp_path / "docs.jsonl"
    source.write_text('{"_id": "ok", "text": "fine doc"}\n'
                      '{"_id": "s", "text": "lone \\ud800 surrogate"}\n'
                      '{"_id": "pair", "text": "a pair \\ud83d\\ude00 is an emoji"}\n'
                      '{"_id": "t", "title": "\\udc00", "text": "bad title"}\n'
                      '{"_id": "m", "text": "bad metadata", "meta": {"tags": ["\\uDBFF"]}}\n', encoding="utf-8")
    report = _ingest(source, tmp_path / "idx")
    assert report.docs == 2 and _live(tmp_path / "idx") == ["ok", "pair"]
    failures = _open(tmp_path / "idx")
    assert failures == {
        "docs.jsonl:2": "field 'text' holds a lone surrogate (\\ud800) at character 5, which is not text",
        "docs.jsonl:4": "field 'title' holds a lone surrogate (\\udc00) at character 0, which is not text",
        "docs.jsonl:5": "field 'meta.tags.0' holds a lone surrogate (\\udbff) at character 0, which is not text"}


def test_utf16_jsonl_and_csv_are_one_failure_of_the_file_saying_to_convert_and_a_utf16_text_file_is_read(tmp_path):
    """JSONL and CSV are read line by line, which UTF-16 cannot be: with its byte-order mark each line was a failure
    saying to give the encoding (which was then refused); without it (Latin text, every other byte NUL, valid UTF-8)
    each line was "not valid JSON". A text file in UTF-16 without the mark was indexed as NULs that no search found."""
    jsonl, csv, text = tmp_path / "jsonl", tmp_path / "csv", tmp_path / "text"
    for folder in (jsonl, csv, text):
        folder.mkdir()
    lines = "".join(json.dumps({"_id": f"j{i}", "text": f"mango number {i}"}) + "\n" for i in range(3))
    (jsonl / "a.jsonl").write_text(lines, encoding="utf-16")
    (jsonl / "b.jsonl").write_bytes(lines.encode("utf-16-le"))
    (jsonl / "c.jsonl").write_text(json.dumps({"_id": "ok", "text": "plain banana"}) + "\n")
    (csv / "d.csv").write_text(HEADER + "d1,T,cherry pie\n", encoding="utf-16")
    (csv / "e.csv").write_text(HEADER + "e1,T,plain kiwi\n")
    (text / "f.txt").write_bytes("Papaya grows in the tropics".encode("utf-16-be"))
    convert = "and JSONL and CSV are read line by line, in an encoding that writes a newline as one byte: convert it"
    bom = "the file is UTF-16 text (it starts with its byte-order mark), " + convert + " to UTF-8 (iconv -f UTF-16 -t"

    assert _ingest(jsonl, tmp_path / "idx").docs == 1
    assert _open(tmp_path / "idx") == {
        "a.jsonl": f"{jsonl / 'a.jsonl'}: {bom} UTF-8 FILE > NEW_FILE)",
        "b.jsonl": f"{jsonl / 'b.jsonl'}: the file is UTF-16LE text (every other byte is NUL), {convert} to UTF-8 "
                   "(iconv -f UTF-16LE -t UTF-8 FILE > NEW_FILE)"}
    assert _ingest(csv, tmp_path / "idx").docs == 1
    assert _open(tmp_path / "idx")["d.csv"] == f"{csv / 'd.csv'}: {bom} UTF-8 FILE > NEW_FILE)"
    assert _ingest(text, tmp_path / "idx").docs == 1
    texts = Index.open(tmp_path / "idx").columns(["doc_id", "text"])[1].to_pydict()["text"]
    assert sorted(texts) == ["Papaya grows in the tropics", "plain banana", "plain kiwi"]



_OPENED: list[str] = []  # the files opened while a test counts them (an audit hook cannot be removed once added)


def _count_opens(event: str, args: tuple) -> None:
    if event == "open" and _OPENED and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_count_opens)


def _opens(call) -> tuple[object, Counter]:
    """``call()``, and how many times it opened each file."""
    _OPENED[:] = ["counting"]
    try:
        result = call()
    finally:
        opened, _OPENED[:] = _OPENED[1:], []
    return result, Counter(str(Path(path)) for path in opened)


def test_a_retry_reads_a_file_once_for_all_its_failed_lines_and_makes_the_same_documents(tmp_path):
    """A retry read a source file from its start once for each failed line (and again for the columns of a JSONL
    file's first record): K failed rows of a big file were K passes over it. A file's failed lines are read in
    one pass, into the documents they made one by one."""
    jsonl, csv = tmp_path / "docs.jsonl", tmp_path / "docs.csv"
    good = [json.dumps({"_id": f"j{i}", "title": "T", "text": f"line {i}"}) for i in range(7)]
    jsonl.write_text("\n".join(good[:1] + ["not json", good[2], '{"_id": "j3"}', "[1]", good[5], "{"]) + "\n")
    csv.write_text(HEADER + "c1,T,first\nc2,T,one,two\nc3,T,third\nc4,T,x,y\nc5,T,\"never closed\n")
    for source in (jsonl, csv):
        _ingest(source, tmp_path / "idx")
    assert sorted(_open(tmp_path / "idx")) == ["docs.csv:3", "docs.csv:5", "docs.csv:6", "docs.jsonl:2",
                                               "docs.jsonl:4", "docs.jsonl:5", "docs.jsonl:7"]
    jsonl.write_text("\n".join(good[:4] + ["[1]"] + good[5:]) + "\n")  # fixed, all but line 5
    csv.write_text(HEADER + 'c1,T,first\nc2,T,"one,two"\nc3,T,third\nc4,T,"x,y"\nc5,T,"closed"\n')
    retried, opens = _opens(lambda: _ingest(None, tmp_path / "idx", retry_failed=True))
    # one pass over each file (a CSV file's first bytes read for its encoding; a JSONL file's first record for its
    # columns); it was that for each failed line
    assert (opens[str(jsonl)], opens[str(csv)]) == (2, 2)
    assert (retried.resolved, retried.open_failures) == (6, 1) and list(_open(tmp_path / "idx")) == ["docs.jsonl:5"]
    stored = Index.open(tmp_path / "idx").columns(["doc_id", "title", "text"])[1].to_pylist()
    assert sorted(tuple(d.values()) for d in stored) == [
        *[(f"c{i}", "T", t) for i, t in enumerate(["first", "one,two", "third", "x,y", "closed"], 1)],
        *[(f"j{i}", "T", f"line {i}") for i in (0, 1, 2, 3, 5, 6)]]
