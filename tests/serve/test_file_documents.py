"""An uploaded text, Markdown or HTML file (``serve.indices.documents.file_documents``) becomes the document
``sources.files`` reads from the same file on disk: the same id, title and text; a Markdown file's title is its first
heading, an HTML page's its ``<title>`` and its text that of its body; a file that is not UTF-8 is read in the encoding
guessed for it, as on disk; bytes no encoding reads, a page with no text and suffixes the upload does not take are a
422 naming the file. Real files, no Ray."""

from __future__ import annotations

import codecs

import pyarrow as pa
import pytest

from operators.registry import create
from serve.indices.documents import file_documents, files_request
from serve.http.errors import ApiError
from serve.service_settings import Limits

FILES = {"notes.txt": "Honey bees make honey.\n", "kiwi.md": "Kiwi\n====\n\n```\n# code\n```\nThey lay big eggs.\n",
         "weta.markdown": "\ufeff# Giant weta\n\nHeavy insects.",
         "tui.html": "<!doctype html><html><head><title>Tui &amp; bellbirds</title><style>p {color: red}</style>"
                     "</head><body><h1>Tui</h1><p>They sing\n  at dawn.</p><script>track()</script></body></html>",
         "moa.HTM": "<p>Moa were <b>giant</b> birds.</p><ul><li>nine species</li></ul>"}


@pytest.mark.parametrize("name", sorted(FILES))
def test_an_upload_is_the_document_the_source_reads_from_disk(tmp_path, name):
    (tmp_path / name).write_text(FILES[name], encoding="utf-8")
    [uploaded] = file_documents(name, (tmp_path / name).read_bytes(), Limits())
    [read] = create("sources.files", {"path": str(tmp_path / name)})(pa.table({})).to_pylist()
    assert (uploaded["id"], uploaded["title"], uploaded["text"], uploaded["metadata"]) == (
        read["docno"], read["title"], read["text"], {"path": read["path"]})


def test_an_upload_that_is_not_utf8_is_the_document_the_source_reads_from_disk(tmp_path):
    """It was a 422 ('not UTF-8 text'), as the file was a failure of tessera ingest; both guess its encoding now."""
    (tmp_path / "menu.md").write_bytes("---\ntitle: Café menu\n---\nCrème brûlée, très bon.\n".encode("cp1252"))
    [uploaded] = file_documents("menu.md", (tmp_path / "menu.md").read_bytes(), Limits())
    [read] = create("sources.files", {"path": str(tmp_path / "menu.md")})(pa.table({})).to_pylist()
    assert (uploaded["title"], uploaded["text"]) == (read["title"], read["text"]) == ("Café menu",
                                                                                     "Crème brûlée, très bon.\n")


def test_titles_from_the_first_heading_else_the_file_name():
    titles = [file_documents(name, FILES[name].encode(), Limits())[0]["title"] for name in sorted(FILES)]
    assert titles == ["Kiwi", "moa", "notes", "Tui & bellbirds", "Giant weta"]
    assert file_documents("weta.markdown", FILES["weta.markdown"].encode(), Limits())[0]["text"] == \
        "# Giant weta\n\nHeavy insects."  # the byte-order mark is not text
    [tui] = file_documents("tui.html", FILES["tui.html"].encode(), Limits())
    assert tui["text"] == "Tui\nThey sing at dawn."  # the body's text: no style, no script, a line per block


@pytest.mark.parametrize("name,content,words", [
    ("binary.txt", bytes(range(128, 256)), "files: 'binary.txt' is not UTF-8 text (invalid start byte, and no other "
     "encoding could be guessed, at byte 1); save it as UTF-8"),
    ("report.docx", b"PK\x03\x04", "'report.docx' is not a PDF, text, Markdown, HTML or CSV file (.pdf, .txt, "
     ".md, .markdown, .html, .htm, .csv)"),
    ("blank.html", b"<html><head><title>Blank</title><script>go()</script></head><body> </body></html>",
     "files: 'blank.html' has no text (an HTML page's is that of its body"),
    ("empty.txt", b"\n\n", "files: 'empty.txt' has no text; nothing to index, nothing of this request was added"),
    ("nul.txt", b"\x00\x00\x00\x00", "files: 'nul.txt' has no text"),  # valid UTF-8, and indexed as a passage before
    ("bin.txt", b"\x00\x01\x02\xe2\x80\x8b", "files: 'bin.txt' has no text"),  # control bytes and a zero-width space
    ("../notes.txt", b"x", "'../notes.txt' is not a file name"),
    ("menu\x00.csv", b"id,text\nm1,x\n", "'menu\x00.csv' is not a file name"),  # a CSV's copy took the name: a 500
])
def test_a_file_that_gives_no_document_is_a_422_naming_it(name, content, words):
    with pytest.raises(ApiError) as err:
        file_documents(name, content, Limits())
    assert err.value.status == 422 and words in err.value.message


def test_a_file_name_too_long_for_an_id_is_a_422_naming_files_not_a_field_the_client_never_sent():
    name = "n" * 246 + ".txt"
    with pytest.raises(ApiError) as refused:
        files_request([("short.txt", b"Bees."), (name, b"Wasps.")], None, False, None, Limits())
    assert (refused.value.status, refused.value.param, refused.value.code) == (422, "files", "invalid_file")
    assert refused.value.message.startswith(f"files: the name of '{name[:40]}...' (250 characters) makes a document "
                                            "id of 250 characters, and an id has at most 200: rename the file")
    assert files_request([("n" * 196 + ".txt", b"Wasps.")], None, False, None, Limits())[0].documents[0].id


def test_a_part_of_a_pdf_goes_alone_and_replaces_only_its_own_pages():
    with pytest.raises(ApiError, match="^first_page: a part of a PDF file is sent with that file alone") as refused:
        files_request([("a.pdf", b"%PDF"), ("notes.txt", b"Bees.")], None, False, 3, Limits())
    assert refused.value.param == "first_page"
    # a whole file sent again with replace takes away all it gave before; a part after the first keeps the others
    assert files_request([("notes.txt", b"Bees.")], None, True, None, Limits())[1:] == (["notes.txt"], [])


def test_front_matter_is_metadata_and_a_guessed_encoding_or_a_field_left_out_is_a_warning_for_the_client(tmp_path):
    (tmp_path / "kea.md").write_bytes("---\ntitle: Kea\nauthor: Renée\nyear: 2024\ntags: [alpine, birds]\n"
                                      "text: a clash\n---\nKea are parrots.\n".encode("cp1252"))
    warnings: list[str] = []
    [uploaded] = file_documents("kea.md", (tmp_path / "kea.md").read_bytes(), Limits(), warnings=warnings)
    [read] = create("sources.files", {"path": str(tmp_path / "kea.md")})(pa.table({})).to_pylist()
    assert uploaded["metadata"] == {"path": "kea.md", "author": "Renée", "year": 2024, "tags": '["alpine", "birds"]'}
    assert {key: read[key] for key in ("author", "year", "tags")} == {  # tessera ingest's columns
        key: uploaded["metadata"][key] for key in ("author", "year", "tags")}
    assert warnings == [
        "kea.md: not UTF-8; read as cp1252, the encoding guessed for it (if its text looks wrong, save it as UTF-8 "
        "and send it again)",
        "kea.md: front matter field(s) text left out: a metadata column's name is ASCII letters, digits and _ (64 at "
        "most), starting with a letter, and none of _id, chunk_id, chunk_index, doc_id, docno, id, page, path, qid, "
        "query, rank, score, text, title, total_chunks, vector"
        ", nor starting with score_ or rank_ (a search's scores and ranks)"]


def test_front_matter_that_is_not_valid_yaml_is_a_warning_for_the_client_not_a_log_line_of_the_service():
    """A title with ': ' in it: the front matter stayed in the text, the title came from the first heading and the
    year was lost, and only the service's log said so."""
    warnings: list[str] = []
    [document] = file_documents("bad.md", b"---\ntitle: Bad: title\nyear: 2021\n---\n# Heading two\nText.\n", Limits(),
                                warnings=warnings)
    assert document["title"] == "Heading two" and document["text"].startswith("---\ntitle: Bad: title")
    assert warnings == ["bad.md: its front matter is not valid YAML (mapping values are not allowed here at line 2): "
                        "it is kept in the text, and gives no title nor fields"]


def test_a_markdown_file_gives_the_same_fields_through_tessera_ingest_and_an_upload(tmp_path, caplog):
    """Front matter became fields under two rules: ``tessera ingest`` kept every name but the file's own columns (a
    `score` that search's scores then met, `my tag` that no filter could name, a null as a column of nulls) and
    left out a `page`, which the upload kept; the upload left out names no metadata column may have. One rule
    now: the doc-store rows of the file ingested from disk and of its upload (the JSONL file an upload's task
    ingests) are the same, and so are the warnings."""
    import logging

    from flows.ingestion import ingest
    from operators.store import Index
    from serve.indices.documents import write_jsonl

    content = ("---\ntitle: Kea\nauthor: Renée\nyear: 2024\ndate: 2024-05-01\ndraft: false\nrating: 4.5\n"
               "tags: [alpine, birds]\nlinks: {home: 'https://kea.example'}\nscore: 0.9\nmy tag: x\n"
               "last-modified: 2024-06-01\npage: 3\nreviewed:\n---\nKea are alpine parrots.\n")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "kea.md").write_text(content, encoding="utf-8")
    caplog.set_level(logging.WARNING, logger="tessera.sources")
    ingest(folder, tmp_path / "cli", settings={"dense": False}, executor="local", chunk=False, progress=False)
    request, _, warnings = files_request([("kea.md", content.encode())], None, False, None, Limits())
    write_jsonl(tmp_path / "upload.jsonl", request.documents)
    ingest(tmp_path / "upload.jsonl", tmp_path / "up", settings={"dense": False}, executor="local", chunk=False,
           progress=False)

    def fields(index) -> dict:
        [row] = Index.open(index).columns(Index.open(index).column_names())[1].to_pylist()
        return {key: value for key, value in row.items() if value is not None}

    assert fields(tmp_path / "cli") == fields(tmp_path / "up") == {
        "docno": "kea.md", "doc_id": "kea.md", "title": "Kea", "text": "Kea are alpine parrots.\n", "path": "kea.md",
        "author": "Renée", "year": 2024, "date": "2024-05-01", "draft": False, "rating": 4.5,
        "tags": '["alpine", "birds"]', "links": '{"home": "https://kea.example"}'}
    left_out = [r.getMessage() for r in caplog.records if "front matter" in r.getMessage()]
    assert left_out == warnings == [
        "kea.md: front matter field(s) score, my tag, last-modified, page left out: a metadata column's name is "
        "ASCII letters, digits and _ (64 at most), starting with a letter, and none of _id, chunk_id, chunk_index, "
        "doc_id, docno, id, page, path, qid, query, rank, score, text, title, total_chunks, vector"
        ", nor starting with score_ or rank_ (a search's scores and ranks)"]


@pytest.mark.parametrize("bom", [b"", codecs.BOM_UTF8], ids=["no-mark", "byte-order-mark"])
def test_a_stray_byte_in_utf8_text_is_a_warning_for_the_client_as_tessera_ingest_warns(bom):
    """A byte that is not UTF-8 in UTF-8 text is read as U+FFFD; ``tessera ingest`` said so, the upload's answer did
    not (only a file guessed to be in another encoding was said). The byte is counted in the file, its byte-order
    mark too."""
    content = bom + "caf\u00e9 caf\u00e9 caf\u00e9 stray ".encode() + b"\x92 byte"
    warnings: list[str] = []
    [uploaded] = file_documents("stray.txt", content, Limits(), warnings=warnings)
    assert uploaded["text"] == "caf\u00e9 caf\u00e9 caf\u00e9 stray \ufffd byte"
    at = content.index(0x92) + 1
    assert warnings == [f"stray.txt: UTF-8 text with a byte that is not UTF-8 (0x92 at byte {at}): read as UTF-8, "
                        "each such byte as U+FFFD (if its text looks wrong, save it as UTF-8 and send it again)"]
    clean: list[str] = []
    file_documents("clean.txt", "caf\u00e9".encode(), Limits(), warnings=clean)
    assert clean == []


def test_a_sheet_saved_as_unicode_text_is_a_422_saying_how_to_read_its_rows():
    """Excel's "Unicode Text" (UTF-16 with its mark, tab-separated, CRLF) was indexed as one passage with a warning;
    the upload is refused, as tessera ingest fails the file, saying what it is and how to get a document per row.
    The same table in UTF-8 is one document with the warning; code indented by tabs is no table."""
    sheet = "\r\n".join(["id\ttitle\ttext", "d1\tKiwi\tKiwi lay eggs.", "d2\tKea\tKea are parrots.", ""])
    with pytest.raises(ApiError) as refused:
        file_documents("sheet.txt", codecs.BOM_UTF16_LE + sheet.encode("utf-16-le"), Limits())
    assert (refused.value.status, refused.value.param) == (422, "files")
    assert refused.value.message.startswith("files: 'sheet.txt' is UTF-16 tab-separated text (3 lines of 3 fields), "
                                            "as Excel saves a sheet as Unicode Text: not read as one document; for "
                                            "a document per row save the sheet as CSV UTF-8, or it reads as utf_16")
    warnings: list[str] = []
    [uploaded] = file_documents("sheet.txt", sheet.encode(), Limits(), warnings=warnings)
    assert uploaded["text"] == sheet.replace("\r\n", "\n")
    assert [w for w in warnings if "table" in w] == [
        "sheet.txt: reads as a table (3 lines of 3 tab-separated fields, as a sheet saved as text is), read as "
        "one document; for a document per row, save the sheet as CSV UTF-8 and read that .csv (its header "
        "row names the id and text columns)"]
    code: list[str] = []
    file_documents("loop.txt", b"for x in xs:\n\tprint(x)\n\tcount += 1\n", Limits(), warnings=code)
    prose: list[str] = []
    file_documents("notes.txt", b"Honey bees make honey.\nThey live in hives.\n", Limits(), warnings=prose)
    assert code == prose == []
