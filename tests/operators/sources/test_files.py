"""sources.files: a folder of PDF, text, Markdown and HTML files read each by its kind (a PDF a document per page,
another file one document named by its path), titles from a Markdown heading or an HTML <title>, the files of other
suffixes named in one warning, a file that is not UTF-8 an error naming it. Real files in tmp_path."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from operators.errors import SourceError, SourceNotFoundError
from operators.registry import create
from operators.sources.file_text import html_text, read_text_file
from operators.sources.files import SUFFIXES
from operators.testing import OperatorContract

PAGE = """<!doctype html><html><head><title>Weta  &amp; wetapunga</title><style>p {color: red}</style>
<script>var hidden = "not text";</script></head>
<body><h1>Giant weta</h1><p>Among the heaviest insects<br>in the world.</p><script>alert("no")</script>
<ul><li>Wetapunga</li><li>Tree weta</li></ul></body></html>"""


@pytest.fixture
def docs(tmp_path, pdf_writer):
    folder = tmp_path / "docs"
    folder.mkdir()
    pdf_writer(folder / "birds.pdf", ["Kakapo are flightless parrots.", "", "Takahe live in the mountains."],
               title="Flightless birds")
    (folder / "notes.txt").write_text("Honey bees make honey from nectar.\n", encoding="utf-8")
    (folder / "notes.md").write_text("Intro line\n\n## Kiwi, the bird\n\nKiwi lay large eggs.\n", encoding="utf-8")
    (folder / "weta.html").write_text(PAGE, encoding="utf-8")
    (folder / "report.docx").write_bytes(b"PK\x03\x04")
    (folder / "photo.png").write_bytes(b"\x89PNG")
    (folder / ".hidden.md").write_text("# not read")
    (folder / "sub").mkdir()
    (folder / "sub" / "deep.md").write_text("# Deep\n\nIn a subfolder.")
    return folder


class TestFilesContract(OperatorContract):
    operator_name = "sources.files"

    @pytest.fixture(autouse=True)
    def _folder(self, docs):
        self.path = docs

    def make_operator(self, **params):
        return create(self.operator_name, {"path": str(self.path), **params})


def test_a_mixed_folder_is_read_each_file_by_its_kind_and_the_others_named_once(docs, caplog):
    op = create("sources.files", {"path": str(docs)})
    with caplog.at_level(logging.WARNING, logger="tessera.sources"):
        out = op(pa.table({}))
        op(pa.table({}))
    rows = {r["docno"]: r for r in out.to_pylist()}
    assert list(rows) == ["birds-p1", "birds-p3", "notes.md", "notes.txt", "weta.html"]
    assert [(r["path"], r["page"], r["title"]) for r in rows.values()] == [
        ("birds.pdf", 1, "Flightless birds"), ("birds.pdf", 3, "Flightless birds"),
        ("notes.md", None, "Kiwi, the bird"), ("notes.txt", None, "notes"), ("weta.html", None, "Weta & wetapunga")]
    assert rows["notes.txt"]["text"] == "Honey bees make honey from nectar.\n"
    assert rows["weta.html"]["text"] == "Giant weta\nAmong the heaviest insects\nin the world.\nWetapunga\nTree weta"
    # once for the operator, though it was called twice
    [warning, below] = [r.getMessage() for r in caplog.records]
    assert warning.startswith(f"{docs}: 2 file(s) not read, of a kind no reader takes: photo.png, report.docx (read: ")
    assert ".hidden" not in warning
    assert below == f"{docs}: 1 subfolder(s) not read: sub (a glob reads them too: '{docs}/**/*')"


def test_a_folder_whose_documents_are_all_in_subfolders_says_how_to_read_them(tmp_path):
    (tmp_path / "docs" / "2024").mkdir(parents=True)
    (tmp_path / "docs" / "2024" / "lunch.html").write_text("<p>Lunch is at noon.</p>")
    (tmp_path / "docs" / "photo.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(SourceNotFoundError) as error:
        create("sources.files", {"path": str(tmp_path / "docs")})(pa.table({}))
    assert str(error.value).endswith(f"holds no document file ({', '.join(SUFFIXES)}) among its 1 file(s); its 1 "
                                     f"subfolder(s) are not read (a glob reads them too: '{tmp_path}/docs/**/*')")


def test_a_file_a_glob_and_a_glob_of_every_file_below_a_folder(docs):
    def docnos(path: str) -> list[str]:
        return create("sources.files", {"path": path})(pa.table({})).column("docno").to_pylist()

    assert docnos(str(docs / "notes.md")) == ["notes.md"]
    assert docnos(str(docs / "*.md")) == ["notes.md"]  # hidden files are not matched by a glob either
    assert docnos(str(docs / "**" / "*.md")) == ["notes.md", "sub/deep.md"]
    assert docnos(str(docs / "**" / "*")) == ["birds-p1", "birds-p3", "notes.md", "notes.txt", "sub/deep.md",
                                             "weta.html"]
    per_file = create("sources.files", {"path": str(docs), "unit": "document", "limit": 2})(pa.table({}))
    assert per_file.column("docno").to_pylist() == ["birds", "notes.md"]


def test_a_file_that_is_not_in_the_encoding_given_is_an_error_naming_it_and_the_others_are_read(docs):
    (docs / "latin1.txt").write_bytes("caf\u00e9 au lait".encode("latin-1"))
    op = create("sources.files", {"path": str(docs), "encoding": "utf-8"})  # given: no other one is guessed
    splits = op.splits()
    with pytest.raises(SourceError, match=r"'latin1.txt' is not UTF-8 text \(invalid continuation byte, at byte 4\)"):
        list(op.read(next(s for s in splits if s.endswith("latin1.txt"))))
    assert sum(t.num_rows for s in splits if not s.endswith("latin1.txt") for t in op.read(s)) == 5


def test_an_image_named_as_a_text_file_is_said_to_be_binary_not_to_want_an_encoding(docs):
    """A PNG saved as ``photo.txt`` failed as "not UTF-8 text (invalid start byte, ..., at byte 0); give its encoding
    (tessera ingest --encoding)": no encoding helps, and the byte was counted from 0 where the warnings count from 1."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b""))
    (docs / "photo.txt").write_bytes(png)
    op = create("sources.files", {"path": str(docs)})
    split = next(s for s in op.splits() if s.endswith("photo.txt"))
    with pytest.raises(SourceError) as err:
        list(op.read(split))
    assert err.value.message == ("'photo.txt' holds binary data, not text (a NUL byte at byte 9, as in an image or an "
                                 "archive)")


def test_record_files_among_the_documents_are_named_with_the_glob_that_reads_them(docs, caplog):
    """A CSV export in a folder of notes read by ``notes/*`` was named among files "of a kind no reader takes", where
    sources.csv reads it: it is named apart, with the glob of its kind that ingests it."""
    (docs / "people.csv").write_text("_id,text\np1,Einstein\n")
    (docs / "places.jsonl").write_text('{"_id": "x", "text": "Everest"}\n')
    caplog.set_level(logging.WARNING, logger="tessera.sources")
    out = create("sources.files", {"path": str(docs / "*")})(pa.table({}))
    assert "people.csv" not in out.column("path").to_pylist()
    assert caplog.messages[0] == (f"{docs}/*: 2 file(s) of records not read with the documents: people.csv, "
                                  "places.jsonl (ingest them as a source of their own, a glob of them: "
                                  f"'{docs}/*.csv')")
    assert "people.csv" not in caplog.messages[1] and "photo.png" in caplog.messages[1]


def test_what_it_cannot_read_is_refused_naming_the_path(tmp_path):
    (tmp_path / "data.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "a.json").write_text("{}")
    with pytest.raises(SourceError, match=r"data.json' is not a document file of a kind this source reads"):
        create("sources.files", {"path": str(tmp_path / "data.json")}).splits()
    with pytest.raises(SourceNotFoundError, match=r"does not exist"):
        create("sources.files", {"path": str(tmp_path / "nope.md")}).splits()
    with pytest.raises(SourceNotFoundError, match=r"holds no document file .* among its 1 file"):
        create("sources.files", {"path": str(tmp_path / "empty")}).splits()


def test_a_blank_file_gives_no_document(tmp_path):
    (tmp_path / "blank.md").write_text(" \n\n")
    (tmp_path / "scripts.html").write_text("<html><body><script>x()</script></body></html>")
    (tmp_path / "nul.txt").write_bytes(b"\x00\x01\x02\n")  # valid UTF-8 of control characters only: no text either
    assert create("sources.files", {"path": str(tmp_path)})(pa.table({})).num_rows == 0


@pytest.mark.parametrize("text,title", [
    ("# Title\n\nbody", "Title"),
    ("  ### Closed heading ###  \nbody", "Closed heading"),
    ("```bash\n# a comment, not a heading\n```\n\nSetext title\n============\n", "Setext title"),
    ("~~~\n# inside\n~~~~\n## After the fence", "After the fence"),
    ("---\ntitle: 'From front matter'\ntags: [a]\n---\n# Heading", "From front matter"),
    ("---\nlayout: post\n---\n# Heading after front matter", "Heading after front matter"),
    ("---\ntitle: [not YAML\n---\n# Heading after it", "Heading after it"),
    ("#hashtag, not a heading\n\n    # indented code\n\nplain", None),
    ("", None),
])
def test_the_title_of_a_markdown_file(text, title):
    assert read_text_file("notes.md", text.encode()).title == title


def test_html_without_a_body_or_a_title():
    assert html_text("<p>One &lt;two&gt;</p>\n<p>  three\n four </p>") == (None, "One <two>\nthree four")


def test_a_page_without_a_title_is_titled_by_its_first_heading_before_its_file_name(tmp_path):
    """A page with no ``<title>`` (or an empty one) was titled by its file name though its ``<h1>`` named it."""
    (tmp_path / "eiffel.html").write_text("<html><head><title> </title></head><body><h1><img src=logo.png></h1>"
                                          "<h1>The  Eiffel\n <em>Tower</em></h1><p>It is in Paris.</p></body></html>")
    (tmp_path / "titled.html").write_text("<title>Its title</title><h1>Its heading</h1><p>Text.</p>")
    (tmp_path / "plain.html").write_text("<p>No heading here.</p><script>'<h1>not one</h1>'</script>")
    table = create("sources.files", {"path": str(tmp_path)})(pa.table({}))
    assert dict(zip(table.column("docno").to_pylist(), table.column("title").to_pylist())) == {
        "eiffel.html": "The Eiffel Tower", "plain.html": "plain", "titled.html": "Its title"}


SITE_PAGE = """<html><head><title>Kea | Birds of NZ</title></head><body>
<header><a href="/">Birds of NZ</a><nav><a>Home</a> <a>Parrots</a> <a>Contact</a></nav></header>
<main><article><header><h1>Kea</h1></header><p>Kea are alpine parrots.</p>
<aside>Kea are clever.</aside></article></main>
<aside>Related: Kaka, Kakapo</aside>
<footer>Copyright 2024 Birds of NZ. <a>Privacy</a></footer></body></html>"""


def test_a_saved_web_page_keeps_its_content_without_the_sites_menus_banner_and_footer(tmp_path):
    assert html_text(SITE_PAGE) == ("Kea | Birds of NZ", "Kea\nKea are alpine parrots.\nKea are clever.")
    page = SITE_PAGE.replace("<main>", "<div>").replace("</main>", "</div>")  # no <main>: the furniture still goes
    assert html_text(page)[1] == "Kea\nKea are alpine parrots.\nKea are clever."
    assert html_text("<nav><a>Home</a> <a>About</a></nav>") == (None, "Home About")  # nothing else: kept
    (tmp_path / "kea.html").write_text(SITE_PAGE, encoding="utf-8")
    document = read_text_file("kea.html", (tmp_path / "kea.html").read_bytes())
    assert "Privacy" not in document.text and "Contact" not in document.text and "Kakapo" not in document.text


def test_a_page_without_a_title_is_titled_by_its_own_heading_not_the_sites_banner():
    """A site's header often holds the site's name in an ``<h1>`` on every page: each page without a ``<title>``
    was titled by it, not by its own heading."""
    page = SITE_PAGE.replace("<title>Kea | Birds of NZ</title>", "").replace(
        '<a href="/">Birds of NZ</a>', '<h1><a href="/">Birds of NZ</a></h1>')
    assert html_text(page)[0] == "Kea"
    assert html_text(page.replace("<main>", "<div>").replace("</main>", "</div>"))[0] == "Kea"  # no <main>
    only_the_banner = "<body><header><h1>Birds of NZ</h1></header><p>Kea are alpine parrots.</p></body>"
    assert html_text(only_the_banner) == ("Birds of NZ", "Kea are alpine parrots.")  # better than none


def test_a_front_matter_date_that_names_no_day_is_its_text():
    """``date: 2024-02-30``: PyYAML raised a bare ValueError for it, which failed the file; it is kept as written."""
    from operators.sources.file_text import front_matter

    assert front_matter("---\ndate: 2024-02-30\nday: 2024-02-28\n---\nBees.\n") == (
        {"date": "2024-02-30", "day": "2024-02-28"}, "Bees.\n", None)


def test_a_file_saved_on_windows_is_the_same_document_as_one_saved_on_linux(tmp_path):
    """CRLF (Windows) and CR (old Mac) line ends read as LF: no ``\\r`` in the text, the title or a field, and the
    document equals the LF file's, so a clone checked out with autocrlf re-ingests as unchanged."""
    for folder, end in (("lf", "\n"), ("crlf", "\r\n"), ("cr", "\r")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "notes.md").write_bytes(
            end.join(["---", "author: Ana", "---", "# Kiwi", "", "Kiwi lay large eggs.", "They are nocturnal.", ""])
            .encode())
        (tmp_path / folder / "plain.txt").write_bytes(end.join(["Honey bees", "", "make honey."]).encode())
        (tmp_path / folder / "page.html").write_bytes(
            end.join(["<html><head><title>Weta</title></head><body>", "<pre>line one", "line two</pre>",
                      "</body></html>"]).encode())
    tables = {folder: create("sources.files", {"path": str(tmp_path / folder)})(pa.table({})).to_pylist()
              for folder in ("lf", "crlf", "cr")}
    assert tables["crlf"] == tables["lf"] and tables["cr"] == tables["lf"]
    assert not any("\r" in str(value) for row in tables["crlf"] for value in row.values())
    rows = {row["docno"]: row for row in tables["crlf"]}
    assert rows["notes.md"]["title"] == "Kiwi" and "eggs.\nThey are nocturnal." in rows["notes.md"]["text"]
    assert rows["plain.txt"]["text"] == "Honey bees\n\nmake honey."


def test_a_sheet_saved_as_unicode_text_is_refused_saying_how_to_read_its_rows(tmp_path, caplog):
    """Excel's "Unicode Text" (UTF-16 with its mark, tab-separated, CRLF) was one document of the whole sheet, a
    warning aside; it is a failure of the file naming what it is and the two ways to a document per row. The same
    table in UTF-8 (no Excel signature: a tab-aligned list) is still one document with the warning."""
    sheet = "\r\n".join(["id\ttitle\ttext", "d1\tKiwi\tKiwi lay eggs.", "d2\tKea\tKea are parrots.", ""])
    (tmp_path / "sheet.txt").write_bytes(b"\xff\xfe" + sheet.encode("utf-16-le"))
    with pytest.raises(SourceError) as caught:
        create("sources.files", {"path": str(tmp_path / "sheet.txt")})(pa.table({}))
    assert caught.value.message == (
        "'sheet.txt' is UTF-16 tab-separated text (3 lines of 3 fields), as Excel saves a sheet as Unicode Text: not "
        "read as one document; for a document per row save the sheet as CSV UTF-8, or it reads as utf_16: save it, "
        "named .tsv, as UTF-8 (iconv -f UTF-16 -t UTF-8 FILE > NEW_FILE)")
    (tmp_path / "utf8").mkdir()
    (tmp_path / "utf8" / "sheet.txt").write_bytes(sheet.encode())
    with caplog.at_level(logging.WARNING, logger="tessera.sources"):
        [row] = create("sources.files", {"path": str(tmp_path / "utf8" / "sheet.txt")})(pa.table({})).to_pylist()
    assert row["text"].startswith("id\ttitle\ttext\nd1\tKiwi")
    assert any("sheet.txt: reads as a table (3 lines of 3 tab-separated fields" in m and "CSV UTF-8" in m
               for m in caplog.messages)
