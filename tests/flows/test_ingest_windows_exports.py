"""Files as Windows and Excel save them (CRLF line ends, Windows-1252, ';' as the delimiter), made from SciFact's real
documents, through ``tessera ingest`` (in-process, BM25 only) and the service's CSV upload (``file_documents``)."""

from __future__ import annotations

import csv
import io
import json

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
