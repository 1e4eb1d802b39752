"""``POST /v1/indices/{name}/files`` over real HTTP: the API's app (its middlewares, error handlers and routes) served
by uvicorn on 127.0.0.1 without Ray, beside a ``Service`` over a real SQLite task store. Every upload here is
refused before a task is queued, so nothing runs on Ray: a file part without a file name, more files than
``max_documents_per_request``, a form field that is not what it should be, a body that is no form. Uploads that are
accepted and ingested are tested over Serve in ``test_indices_api.py``."""

from __future__ import annotations


import pytest
import requests

from serve.service import Service
from serve.service_settings import ServiceArgs, resolve
from tests.serve.conftest import api_on_localhost


@pytest.fixture
def base(tmp_path, monkeypatch):
    """The API on a free port of 127.0.0.1, its flow service with max_documents_per_request=3."""
    monkeypatch.setenv("TESSERA_HOME", str(tmp_path / "home"))
    args = ServiceArgs(default_index=None, task_store=f"sqlite:///{tmp_path / 'tasks.db'}",
                       limits={"max_documents_per_request": 3})
    Service(resolve(args, environ={}), [], "tessera")
    with api_on_localhost() as base:
        yield base + "/v1/indices/notes/files"


def error(response: requests.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    return response.json()["error"]


def test_a_file_part_without_a_file_name_is_a_422_saying_so(base):
    for name in ("", None):  # a part whose file name is empty, and one sent as a plain field
        sent = [("files", ("notes.txt", b"honey bees", "text/plain")), ("files", (name, b"hello", "text/plain"))]
        err = error(requests.post(base, files=sent, timeout=30), 422)
        assert err["param"] == "files" and "part 2 of `files` has no file name" in err["message"], err


def test_more_files_than_max_documents_per_request_is_a_422_naming_files_and_the_limit(base):
    sent = [("files", (f"f{i}.txt", b"x", "text/plain")) for i in range(4)]
    err = error(requests.post(base, files=sent, timeout=30), 422)
    assert (err["param"], err["code"]) == ("files", "max_documents_per_request")
    assert "max_documents_per_request=3" in err["message"]


def test_the_other_fields_and_a_body_that_is_no_form_are_refused_naming_the_field(base):
    one = [("files", ("notes.txt", b"honey bees", "text/plain"))]
    err = error(requests.post(base, files=one, data={"replace": "maybe"}, timeout=30), 422)
    assert err["param"] == "replace" and "'maybe'" in err["message"]
    err = error(requests.post(base, files=[*one, ("spec", ("spec.txt", b"ingest", "text/plain"))], timeout=30), 422)
    assert err["param"] == "spec"
    err = error(requests.post(base, files=one, data={"spec": "hybrid"}, timeout=30), 422)  # read: it is the index's
    assert err["param"] == "spec" and "not a built-in ingest spec" in err["message"]
    err = error(requests.post(base, json={"files": []}, timeout=30), 422)  # it said "send at least one file"
    assert (err["param"], err["code"]) == ("files", "invalid_body") and "reads a multipart form of files" in \
        err["message"] and "not application/json; documents as JSON go to /v1/indices/notes/documents" in \
        err["message"], err
    err = error(requests.post(base, files=[("file", ("notes.txt", b"honey bees", "text/plain"))], timeout=30), 422)
    assert (err["param"], err["code"]) == ("files", "invalid_value") and "the form's file parts are named 'file', " \
        "not `files`" in err["message"], err
    cut = b'--zzz\r\nContent-Disposition: form-data; name="files"; filename="a.txt"\r\n\r\nabc'  # no closing boundary
    err = error(requests.post(base, data=cut, headers={"content-type": "multipart/form-data; boundary=zzz"},
                              timeout=30), 422)
    assert (err["param"], err["code"]) == ("files", "invalid_value") and "closing boundary" in err["message"]
    err = error(requests.post(base, files=one, data={"first_page": "0"}, timeout=30), 422)
    assert err["param"] == "first_page" and "'0' is not a page number" in err["message"]
    err = error(requests.post(base, files=one, data={"first_page": "2"}, timeout=30), 422)  # a text file has no pages
    assert err["param"] == "first_page" and "a part of a PDF file is sent with that file alone" in err["message"]
    err = error(requests.post(base, files=one, data={"first_row": "x"}, timeout=30), 422)
    assert err["param"] == "first_row" and "'x' is not a row number" in err["message"]
    err = error(requests.post(base, files=one, data={"first_row": "2"}, timeout=30), 422)
    assert err["param"] == "first_row" and "a part of a CSV file is sent with that file alone" in err["message"]


def test_a_csv_file_of_more_rows_than_a_request_may_add_is_refused_with_their_count(base):
    rows = b"id,text\n" + b"".join(b"r%d,row %d\n" % (n, n) for n in range(5))  # 3 a request
    err = error(requests.post(base, files=[("files", ("rows.csv", rows))], timeout=60), 422)
    assert (err["param"], err["code"], err["rows"]) == ("files", "too_many_rows", 5)
    err = error(requests.post(base, files=[("files", ("rows.csv", rows))], data={"first_row": "6"}, timeout=60), 422)
    assert (err["param"], err["message"]) == ("first_row", "first_row: 6 is past the last of the 5 rows with a text "
                                                           "of 'rows.csv'")


def test_a_pdf_of_more_pages_than_a_request_may_add_is_refused_with_its_page_count_and_sent_in_parts(
        base, pdf_writer, tmp_path):
    pdf = pdf_writer(tmp_path / "atlas.pdf", [f"Page {n}." for n in range(1, 6)]).read_bytes()  # 5 pages; 3 a request
    err = error(requests.post(base, files=[("files", ("atlas.pdf", pdf))], timeout=60), 422)
    assert (err["param"], err["code"], err["pages"]) == ("files", "too_many_pages", 5)
    assert err["message"].startswith("files: atlas.pdf: 5 pages, over the 3 documents one upload may add")
    err = error(requests.post(base, files=[("files", ("atlas.pdf", pdf))], data={"first_page": "6"}, timeout=60), 422)
    assert (err["param"], err["message"]) == ("first_page", "files: atlas.pdf: first_page 6 is past its last page (5)")


def test_an_html_page_is_read_as_sources_files_reads_it_and_one_without_text_is_a_422_naming_it(base):
    page = b"<html><head><title>Kea</title><script>track()</script></head><body><nav> </nav></body></html>"
    err = error(requests.post(base, files=[("files", ("kea.htm", page, "text/html"))], timeout=30), 422)
    assert (err["param"], err["code"]) == ("files", "invalid_file")
    assert "'kea.htm' has no text" in err["message"], err  # read (its kind taken), its body empty
    err = error(requests.post(base, files=[("files", ("kea.docx", b"PK\x03\x04", "application/zip"))], timeout=30), 422)
    assert ".html, .htm" in err["message"] and "is not a PDF, text, Markdown, HTML or CSV file" in err["message"], err


def test_a_file_name_with_quotes_is_named_as_the_file_has_it_not_as_the_form_encodes_it(base):
    page = b"<html><body><script>track()</script></body></html>"  # no text: refused, naming the file
    err = error(requests.post(base, files=[("files", ('kea "draft".htm', page, "text/html"))], timeout=30), 422)
    assert """'kea "draft".htm' has no text""" in err["message"], err  # the form sent kea %22draft%22.htm


def test_a_field_the_form_does_not_have_is_a_422_naming_it_and_the_close_name(base):
    """A misspelt ``first_row`` was ignored: the whole CSV file was sent again, from its first row."""
    one = [("files", ("rows.csv", b"id,text\nr1,honey\n", "text/csv"))]
    err = error(requests.post(base, files=one, data={"first_rows": "2"}, timeout=30), 422)
    assert (err["param"], err["code"]) == ("first_rows", "invalid_value"), err
    assert err["message"] == ("first_rows: this form has no field 'first_rows'; did you mean 'first_row'? (fields: "
                              "files, first_page, first_row, replace, spec)")
    err = error(requests.post(base, files=one, data={"colour": "blue"}, timeout=30), 422)
    assert err["param"] == "colour" and "did you mean" not in err["message"], err


@pytest.mark.parametrize("field, values", [("replace", ["true", "false"]), ("spec", ["ingest", "ingest_static"]),
                                           ("first_row", ["2", "2"])])
def test_a_field_sent_twice_is_a_422_naming_it_and_its_values(base, field, values):
    """``replace=true`` then ``replace=false`` was read as one of them without a word (Starlette's form keeps each,
    the route read the last)."""
    one = [("files", ("rows.csv", b"id,text\nr1,honey\n", "text/csv"))]
    err = error(requests.post(base, files=one, data=[(field, value) for value in values], timeout=30), 422)
    assert (err["param"], err["code"]) == (field, "invalid_value"), err
    assert err["message"] == (f"{field}: the form sends this field 2 times ({', '.join(values)}); send it once"), err


def test_a_file_that_is_no_pdf_is_refused_in_words_for_whoever_sent_it_not_the_readers_class_name(base):
    """It read "cannot read as a PDF (PdfStreamError: Stream has ended unexpectedly)": a program's fault, it seemed."""
    err = error(requests.post(base, files=[("files", ("notes.pdf", b"plain text, not a PDF"))], timeout=30), 422)
    assert (err["param"], err["code"]) == ("files", "invalid_file"), err
    assert err["message"].startswith("files: notes.pdf: cannot read as a PDF: the file is damaged or is not a PDF"), err
    assert "Error" not in err["message"], err


def test_a_file_name_too_long_for_the_form_parser_is_a_422_saying_so_and_its_limit(base):
    """A name of 5,000 characters overflows python-multipart's header line (4,224 bytes): Starlette's 400 said
    "Invalid multipart data." and no reason."""
    sent = [("files", ("n" * 5000 + ".txt", b"honey bees", "text/plain"))]
    err = error(requests.post(base, files=sent, timeout=30), 422)
    assert (err["param"], err["code"]) == ("files", "invalid_file"), err
    assert err["message"].startswith("files: a file name is too long") and "at most 4224 bytes" in err["message"], err
