"""Files as Windows and Excel save them (CRLF line ends, Windows-1252, ';' as the delimiter), made from SciFact's real
documents, through ``tessera ingest`` (in-process, BM25 only) and the service's CSV upload (``file_documents``)."""

from __future__ import annotations

import csv
import io
import json
import subprocess

import pytest

from flows.ingestion import ingest
from operators.store import Index

pytestmark = pytest.mark.data

BM25_ONLY = {"dense": False}


@pytest.fixture
def scifact_docs(shared_data) -> list[dict]:
    """SciFact's first 8 documents: real abstracts, with commas, parentheses and quotes in their text."""
    with open(shared_data / "scifact" / "corpus.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line, _ in zip(f, range(8))]


def excel_csv(docs: list[dict], delimiter: str = ",", encoding: str = "cp1252") -> bytes:
    """A CSV as Excel saves it on Windows: CRLF line ends, its code page, a 'Café “naïve”' before each text."""
    out = io.StringIO(newline="")
    writer = csv.writer(out, delimiter=delimiter, lineterminator="\r\n")
    writer.writerow(["_id", "title", "text"])
    for doc in docs:
        writer.writerow([doc["_id"], doc["title"], "Café “naïve” — " + doc["text"]])
    return out.getvalue().encode(encoding, errors="replace")  # as Excel writes "?" for a β


def failures(index_path) -> list:
    from flows.ingestion.ledger import Ledger

    return Ledger(index_path).open_failures(Index.open(index_path).finished_shards())


def test_a_semicolon_csv_of_real_text_is_one_failure_of_the_file_that_names_the_delimiter(tmp_path, scifact_docs):
    """Excel's CSV in much of Europe, of text with commas (every abstract has some): each row was a failure of its
    own, '11 field(s) where the header has 1 (_id;title;text)', and the advice on the delimiter, given where the rows
    held no comma, was never said."""
    path = tmp_path / "export.csv"
    path.write_bytes(excel_csv(scifact_docs, delimiter=";"))
    report = ingest(path, tmp_path / "idx", settings=BM25_ONLY, executor="local", chunk=False, progress=False)
    assert (report.docs, report.failures) == (0, 1)
    [failure] = failures(tmp_path / "idx")
    assert failure.line is None, failure
    assert "the header row is one column, '_id;title;text': its fields are separated by ';'" in failure.error
    assert 'delimiter: ";"' in failure.error, failure.error
    spec = {"steps": {"read": {"op": "sources.csv", "params": {"path": "x.csv", "delimiter": ";"}}}}  # as it says
    report = ingest(path, tmp_path / "idx2", spec=spec, settings=BM25_ONLY, executor="local", chunk=False,
                    progress=False)
    assert (report.docs, report.failures) == (8, 0)


def test_a_semicolon_csv_upload_of_real_text_is_a_422_that_names_the_delimiter(scifact_docs):
    """The upload said 'export.csv, line 2: 11 field(s) where the header has 1', which says nothing of ';'."""
    from serve.http.errors import ApiError
    from serve.indices.documents import file_documents
    from serve.service_settings import Limits

    with pytest.raises(ApiError) as err:
        file_documents("export.csv", excel_csv(scifact_docs, delimiter=";"), Limits())
    assert (err.value.status, err.value.param) == (422, "files")
    assert err.value.message.startswith("files: export.csv: the header row is one column, '_id;title;text': its "
                                        "fields are separated by ';', not ','; an upload reads fields separated by "
                                        "','"), err.value.message


@pytest.fixture
def scifact_queries(shared_data) -> list[dict]:
    with open(shared_data / "scifact" / "queries.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line, _ in zip(f, range(5))]


def test_a_windows_1252_queries_file_is_refused_with_the_iconv_line_that_converts_it_right(tmp_path, scifact_queries):
    """Notepad's or Excel's 'ANSI' file: the advice was iconv -f latin1, which makes the curly quotes (0x93, 0x94)
    C1 control characters in every query; the encoding named now converts them to the quotes."""
    from flows.queries import read_queries
    from operators.errors import SpecError

    path = tmp_path / "queries.tsv"
    lines = [f"{q['_id']}\t{q['text']}" for q in scifact_queries] + ["w1\tCafé “naïve” podocytes"]
    path.write_bytes("\r\n".join(lines).encode("cp1252") + b"\r\n")
    with pytest.raises(SpecError) as err:
        read_queries(str(path))
    at = path.read_bytes().index(b"\xe9")
    assert str(err.value.message) == (
        f"{path}:6: not UTF-8 text (byte 0xe9 at byte {at + 1} of the file); it reads as cp1252: save the queries file "
        "as UTF-8 (iconv -f CP1252 -t UTF-8 FILE > NEW_FILE)"), err.value.message
    converted = subprocess.run(["iconv", "-f", "CP1252", "-t", "UTF-8", str(path)], capture_output=True, check=True)
    (tmp_path / "utf8.tsv").write_bytes(converted.stdout)  # as it says
    assert read_queries(str(tmp_path / "utf8.tsv")).column("query").to_pylist()[-1] == "Café “naïve” podocytes"


def test_an_excel_csv_of_queries_is_read_by_its_delimiter_without_carriage_returns(tmp_path, scifact_queries):
    """'CSV UTF-8' from Excel in Europe: a byte-order mark, ';' between columns, CRLF line ends and a query typed over
    two lines of a cell. It was refused ('needs columns qid and query ..., has ['qid;query']'), and a query quoted
    over two lines of a comma-separated file kept its carriage return."""
    from flows.queries import read_queries

    queries = [(q["_id"], q["text"]) for q in scifact_queries] + [("w1", "Podocytes are motile,\r\nand migrate")]
    for name, delimiter in (("semicolons.csv", ";"), ("commas.csv", ",")):
        out = io.StringIO(newline="")
        writer = csv.writer(out, delimiter=delimiter, lineterminator="\r\n")
        writer.writerows([("qid", "query"), *queries])
        (tmp_path / name).write_bytes(b"\xef\xbb\xbf" + out.getvalue().encode("utf-8"))
        table = read_queries(str(tmp_path / name))
        assert list(zip(table.column("qid").to_pylist(), table.column("query").to_pylist())) == [
            *queries[:-1], ("w1", "Podocytes are motile,\nand migrate")], name


def test_a_windows_1252_csv_of_queries_is_refused_naming_the_byte_and_the_iconv_line(tmp_path, scifact_queries):
    """Excel's plain 'CSV' on Windows: pyarrow's 'In CSV column #1: CSV conversion error to string: invalid UTF8
    data' named no line, no byte and nothing to do."""
    from flows.queries import read_queries
    from operators.errors import SpecError

    path = tmp_path / "queries.csv"
    rows = ["qid,query"] + [f"{q['_id']},\"{q['text']}\"" for q in scifact_queries] + ["w1,“naïve” podocytes"]
    path.write_bytes("\r\n".join(rows).encode("cp1252"))
    with pytest.raises(SpecError) as err:
        read_queries(str(path))
    at = path.read_bytes().index(b"\x93") + 1
    assert err.value.message == (
        f"{path}:7: not UTF-8 text (byte 0x93 at byte {at} of the file); it reads "
        "as cp1252: save the queries file as UTF-8 (iconv -f CP1252 -t UTF-8 FILE > NEW_FILE)")


def test_a_serve_config_and_a_spec_saved_by_notepad_in_windows_1252_are_refused_with_where_and_how(tmp_path):
    """A comment with 'café' typed in Notepad (its 'ANSI' is Windows-1252), with CRLF line ends: the Serve config was
    'internal error: UnicodeDecodeError' (exit 1), a spec 'not a spec (the file is not UTF-8 text)' with no byte or
    advice. The file converted as they say is read."""
    from flows.commands._support import CliError
    from flows.commands.serve import PACKAGED_CONFIG, read_config
    from flows.specfile import load_yaml, read_text
    from operators.errors import SpecError

    config = tmp_path / "serve.yaml"
    packaged = PACKAGED_CONFIG.read_text(encoding="utf-8").replace("\n", "\r\n")
    config.write_bytes(("# Café “prod” settings\r\n" + packaged).encode("cp1252"))
    with pytest.raises(CliError) as err:
        read_config(config)
    assert (err.value.field, err.value.message) == ("config", (
        f"the Serve config {config} is not UTF-8 text (byte 0xe9 at byte 6, line 1); it reads as cp1252: save it as "
        "UTF-8 (iconv -f CP1252 -t UTF-8 FILE > NEW_FILE)"))
    spec = tmp_path / "flow.yaml"
    spec.write_bytes("name: café\r\nsteps:\r\n  bm25: {op: retrieve.bm25}\r\n".encode("cp1252"))
    with pytest.raises(SpecError) as err:
        read_text(spec)
    assert err.value.message == (f"{spec}: not a spec (the file is not UTF-8 text: byte 0xe9 at byte 10, line 1); it "
                                 "reads as cp1252: save it as UTF-8 (iconv -f CP1252 -t UTF-8 FILE > NEW_FILE)")
    for path in (config, spec):
        path.write_bytes(subprocess.run(["iconv", "-f", "CP1252", "-t", "UTF-8", str(path)], capture_output=True,
                                        check=True).stdout)
    assert read_config(config) == read_config(PACKAGED_CONFIG)
    assert load_yaml(read_text(spec))["name"] == "café"


def test_the_command_that_writes_corpus_jsonl_from_an_excel_csv_keeps_its_ids(tmp_path, scifact_docs):
    """A bench folder with corpus.csv saved as Excel's 'CSV UTF-8' (a byte order mark, CRLF): the command the refusal
    gives wrote every line with a field '\\ufeff_id', so the corpus it made was refused in turn as holding no id."""
    import shlex

    from flows.bench.dataset import load_dataset
    from flows.bench.errors import BenchError

    root = tmp_path / "mine"
    (root / "qrels").mkdir(parents=True)
    (root / "corpus.csv").write_bytes(b"\xef\xbb\xbf" + excel_csv(scifact_docs, encoding="utf-8"))
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": scifact_docs[0]["title"]}) + "\n")
    (root / "qrels" / "test.tsv").write_text(f"q1\t{scifact_docs[0]['_id']}\t1\n")
    with pytest.raises(BenchError) as err:
        load_dataset(root)
    argv = shlex.split(err.value.message.split("its columns named so: ", 1)[1].removesuffix(")"))
    exec(argv[2], {})
    written = [json.loads(line) for line in (root / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [d["_id"] for d in written] == [d["_id"] for d in scifact_docs]
    assert load_dataset(root).documents == len(scifact_docs)


def test_a_bench_questions_file_in_windows_1252_is_refused_with_the_iconv_line(tmp_path, shared_data):
    """HotpotQA's questions with accented answers and titles, saved by Notepad as 'ANSI' (Windows-1252, CRLF): tessera
    bench stopped with 'internal error: UnicodeDecodeError'."""
    from flows.bench.answers import load_gold
    from flows.bench.errors import BenchError

    rows = []
    with open(shared_data / "hotpotqa_dev_subset" / "questions.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            text = json.dumps(row, ensure_ascii=False)
            if not text.isascii() and text.encode("cp1252", errors="ignore").decode("cp1252") == text:
                rows.append(row)
    assert len(rows) >= 3
    path = tmp_path / "questions.jsonl"
    path.write_bytes("".join(json.dumps(r, ensure_ascii=False) + "\r\n" for r in rows).encode("cp1252"))
    with pytest.raises(BenchError) as err:
        load_gold(path, [r["_id"] for r in rows])
    assert err.value.field == "dataset"
    assert err.value.message.startswith(f"{path}: not UTF-8 text (byte 0x"), err.value.message
    assert err.value.message.endswith("; it reads as cp1252: save it as UTF-8 (iconv -f CP1252 -t UTF-8 FILE > "
                                      "NEW_FILE)"), err.value.message
    path.write_bytes(subprocess.run(["iconv", "-f", "CP1252", "-t", "UTF-8", str(path)], capture_output=True,
                                    check=True).stdout)
    assert load_gold(path, [r["_id"] for r in rows]) == {
        r["_id"]: list(dict.fromkeys([r["answer"], *r["answer_aliases"]])) for r in rows}


def test_a_training_corpus_in_windows_1252_is_refused_naming_its_line_and_the_iconv_line(tmp_path, scifact_docs):
    """SciFact's abstracts saved by Notepad as 'ANSI', one with 'Café “naïve”': the error named a byte's offset in the
    block Python had decoded (not the file's, nor a line) and nothing to do."""
    from flows.train.corpus import check_corpus
    from flows.train.errors import TrainError

    corpus = tmp_path / "corpus.jsonl"
    docs = [*scifact_docs[:5], {**scifact_docs[5], "text": "Café “naïve” — " + scifact_docs[5]["text"]}]
    corpus.write_bytes("".join(json.dumps(d, ensure_ascii=False) + "\r\n" for d in docs)
                       .encode("cp1252", errors="replace"))
    with pytest.raises(TrainError) as err:
        check_corpus(corpus)
    lines = corpus.read_bytes().split(b"\n")
    number = next(n for n, line in enumerate(lines, 1) if not line.isascii())  # an abstract's ’ or é: 0x92, 0xe9
    at = next(i for i, byte in enumerate(lines[number - 1]) if byte > 127)
    assert err.value.message == (
        f"corpus {corpus} line {number}: not UTF-8 text (byte 0x{lines[number - 1][at]:02x} at byte {at + 1} of the "
        f"line: {'invalid start byte' if lines[number - 1][at] < 0xc0 else 'invalid continuation byte'}); it reads as "
        "cp1252: save it as UTF-8 (iconv -f CP1252 -t UTF-8 FILE > NEW_FILE)")
    corpus.write_bytes(subprocess.run(["iconv", "-f", "CP1252", "-t", "UTF-8", str(corpus)], capture_output=True,
                                      check=True).stdout)
    assert check_corpus(corpus) == 0


def test_the_training_corpus_and_a_source_say_the_same_of_a_line_that_is_not_utf8(tmp_path, scifact_docs):
    """The trainer and ``sources.jsonl`` read the same corpus.jsonl and named its bad byte in two wordings
    (``encoding.undecodable_line`` is both's now); a first line opening with a byte order mark named a byte of the
    mark (0xbf), not the line's."""
    import pyarrow as pa

    from flows.train.corpus import check_corpus
    from flows.train.errors import TrainError
    from operators.errors import SourceError
    from operators.registry import create

    corpus = tmp_path / "corpus.jsonl"
    docs = [{**scifact_docs[0], "text": "Café " + scifact_docs[0]["text"]}, *scifact_docs[1:3]]
    corpus.write_bytes(b"\xef\xbb\xbf" + "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
                       .encode("cp1252", errors="replace"))
    with pytest.raises(TrainError) as trained:
        check_corpus(corpus)
    with pytest.raises(SourceError) as read:
        create("sources.jsonl", {"path": str(corpus), "encoding": "utf-8"})(pa.table({}))
    line = corpus.read_bytes().split(b"\n")[0][3:]
    at = next(i for i, byte in enumerate(line) if byte > 127)
    why = "invalid start byte" if line[at] < 0xc0 else "invalid continuation byte"
    said = f"not UTF-8 text (byte 0x{line[at]:02x} at byte {at + 1} of the line: {why})"
    assert trained.value.message == (f"corpus {corpus} line 1: {said}; it reads as cp1252: save it as UTF-8 (iconv -f "
                                     "CP1252 -t UTF-8 FILE > NEW_FILE)")
    assert f"{corpus}, line 1: {said}; give the file's encoding" in read.value.message
