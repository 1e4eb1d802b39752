"""An uploaded PDF is read in a child process (serve/indices/pdf_reading.py): the same pages as ``read_pdf`` in-process,
a file of too many pages refused before any is read, and one whose pages take too long to draw stopped at the
limit, with a message naming the file. Real PDFs, a real child process; no Ray."""

from __future__ import annotations

import zlib

import pytest

from operators.errors import SourceError
from operators.sources.pdf import TooManyPages, read_pdf
from serve.indices.pdf_reading import pdf_pages


def drawing_pdf(megabytes: int) -> bytes:
    """One page whose deflated content stream shows the same line ``megabytes`` MB worth of times: a few KB on
    disk that take pypdf many seconds to read (8 MB: 13 s on one idle core)."""
    line = b"BT /F1 12 Tf 72 700 Td (a line that is drawn again and again and again) Tj ET\n"
    stream = zlib.compress(line * (megabytes * (1 << 20) // len(line)), 9)
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
               b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
               b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
               b"/Contents 5 0 R >>",
               b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(stream), stream)]
    out, offsets = bytearray(b"%PDF-1.4\n"), []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_the_child_reads_the_pages_read_pdf_reads(tmp_path, pdf_writer):
    path = pdf_writer(tmp_path / "handbook.pdf", ["Bees make honey.", "", "Wasps do not."], title="Handbook")
    assert pdf_pages(path.read_bytes(), "handbook.pdf", seconds=120, max_pages=10) == read_pdf(path) == (
        "Handbook", ["Bees make honey.", "", "Wasps do not."])


def test_too_many_pages_and_what_is_no_pdf_are_refused_naming_the_file(tmp_path, pdf_writer):
    path = pdf_writer(tmp_path / "long.pdf", ["one", "two", "three"])
    with pytest.raises(TooManyPages, match=r"^long.pdf: 3 pages, over the 2 documents one upload may add") as long:
        pdf_pages(path.read_bytes(), "long.pdf", seconds=120, max_pages=2)
    assert long.value.pages == 3  # from the child: the client sends the file in parts of 2 pages
    with pytest.raises(SourceError, match=r"^notes.pdf: cannot read as a PDF"):
        pdf_pages(b"plain text, not a PDF", "notes.pdf", seconds=120, max_pages=2)


def test_a_pdf_that_takes_too_long_to_read_is_stopped_at_the_limit():
    with pytest.raises(SourceError, match=r"^drawn.pdf: reading its text took more than 0.5 s \(max_pdf_seconds\)"):
        pdf_pages(drawing_pdf(8), "drawn.pdf", seconds=0.5, max_pages=10)


def test_a_part_of_a_long_pdf_is_read_from_first_page_and_a_first_page_past_its_end_is_refused(tmp_path, pdf_writer):
    path = pdf_writer(tmp_path / "long.pdf", ["one", "two", "three", "four", "five"])
    assert read_pdf(path, max_pages=2, first_page=1) == (None, ["one", "two"])
    assert read_pdf(path, max_pages=2, first_page=5) == (None, ["five"])
    with pytest.raises(SourceError) as past:
        read_pdf(path, name="long.pdf", max_pages=2, first_page=6)
    assert (past.value.message, past.value.field) == ("long.pdf: first_page 6 is past its last page (5)", "first_page")
