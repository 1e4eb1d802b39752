"""sources.pdf: contract, a document per page (or per file) with the columns references cite, pages without a text
layer skipped, a file that is not a PDF named in the error; PDFs written with the sample corpus's real text."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from operators.errors import SourceError, SourceNotFoundError
from operators.registry import create
from operators.testing import SAMPLE_CORPUS, OperatorContract


@pytest.fixture(scope="module")
def sample_docs() -> list[dict]:
    with open(SAMPLE_CORPUS, encoding="utf-8") as f:
        return [json.loads(line) for line, _ in zip(f, range(6))]


@pytest.fixture(scope="module")
def pdf_folder(tmp_path_factory, pdf_writer, sample_docs):
    """Two PDFs: 'bees.pdf' (titled; three pages, the second blank) and 'cathedrals.pdf' (untitled; two pages)."""
    folder = tmp_path_factory.mktemp("pdfs")
    pdf_writer(folder / "bees.pdf", [sample_docs[0]["text"], "", sample_docs[1]["text"]], title="Bee notes")
    pdf_writer(folder / "cathedrals.pdf", [sample_docs[2]["text"], sample_docs[3]["text"]])
    return folder


class TestPdfContract(OperatorContract):
    operator_name = "sources.pdf"

    @pytest.fixture(autouse=True)
    def _folder(self, pdf_folder):
        self.path = pdf_folder

    def make_operator(self, **params):
        return create(self.operator_name, {"path": str(self.path), **params})


def words(text: str) -> list[str]:
    return text.split()


def test_a_document_per_page_with_the_columns_references_cite(pdf_folder, sample_docs):
    out = create("sources.pdf", {"path": str(pdf_folder)})(pa.table({}))
    assert out.column("docno").to_pylist() == ["bees-p1", "bees-p3", "cathedrals-p1", "cathedrals-p2"]
    assert out.column("page").to_pylist() == [1, 3, 1, 2]  # the blank page 2 is skipped, the numbers kept
    assert out.column("path").to_pylist() == ["bees.pdf", "bees.pdf", "cathedrals.pdf", "cathedrals.pdf"]
    assert out.column("title").to_pylist() == ["Bee notes", "Bee notes", "cathedrals", "cathedrals"]
    expected = [sample_docs[i]["text"] for i in (0, 1, 2, 3)]
    assert [words(t) for t in out.column("text").to_pylist()] == [words(t) for t in expected]  # lines re-wrapped


def test_a_document_per_file_and_a_limit(pdf_folder, sample_docs):
    out = create("sources.pdf", {"path": str(pdf_folder / "*.pdf"), "unit": "document"})(pa.table({}))
    assert out.column("docno").to_pylist() == ["bees", "cathedrals"] and out.column("page").null_count == 2
    assert words(out.column("text")[0].as_py()) == words(sample_docs[0]["text"] + " " + sample_docs[1]["text"])
    limited = create("sources.pdf", {"path": str(pdf_folder), "limit": 3})
    assert limited.splits() == [None] and limited(pa.table({})).column("docno").to_pylist() == [
        "bees-p1", "bees-p3", "cathedrals-p1"]
    one_per_file = create("sources.pdf", {"path": str(pdf_folder)})
    assert [split.rsplit("/", 1)[1] for split in one_per_file.splits()] == ["bees.pdf", "cathedrals.pdf"]


def test_a_file_that_is_not_a_pdf_and_a_missing_one_are_named(tmp_path):
    bad = tmp_path / "notes.pdf"
    bad.write_text("this is plain text, not a PDF")
    with pytest.raises(SourceError, match="notes.pdf: cannot read as a PDF"):
        create("sources.pdf", {"path": str(bad)})(pa.table({}))
    with pytest.raises(SourceNotFoundError, match="missing.pdf"):
        create("sources.pdf", {"path": str(tmp_path / "missing.pdf")})(pa.table({}))


def test_files_of_one_name_in_two_folders_are_named_by_their_path_from_the_globs_folder(tmp_path, pdf_writer):
    root = tmp_path / "pdfs"
    for folder, text in (("a", "Kea are alpine parrots."), ("b", "Huia were wattlebirds.")):
        (root / folder).mkdir(parents=True)
        pdf_writer(root / folder / "report.pdf", [text])
    pdf_writer(root / "report.pdf", ["Takahe are rails."])
    out = create("sources.pdf", {"path": str(root / "**" / "*.pdf")})(pa.table({}))
    assert out.column("docno").to_pylist() == ["a/report-p1", "b/report-p1", "report-p1"]
    assert out.column("path").to_pylist() == ["a/report.pdf", "b/report.pdf", "report.pdf"]
    assert out.column("title").to_pylist() == ["report"] * 3
    by_file = create("sources.pdf", {"path": str(root / "*" / "report.pdf"), "unit": "document"})(pa.table({}))
    assert by_file.column("docno").to_pylist() == ["a/report", "b/report"]
    alone = create("sources.pdf", {"path": str(root / "a" / "report.pdf")})(pa.table({}))  # a file: its stem
    assert (alone.column("docno").to_pylist(), alone.column("path").to_pylist()) == (["report-p1"], ["report.pdf"])
    folder = create("sources.pdf", {"path": str(root / "b")})(pa.table({}))  # a folder: its own files
    assert folder.column("docno").to_pylist() == ["report-p1"]


@pytest.mark.parametrize("title", ["Marie Curie.html", "Microsoft Word - Document1", "Untitled", "report.DOCX",
                                   "file:///home/ana/Marie%20Curie.html"])
def test_a_title_that_is_a_file_name_gives_way_to_the_files_own(tmp_path, pdf_writer, title):
    """Chromium's "Save as PDF" of a page without a <title> writes its file name as the PDF's title, and Word its
    window's: every hit and every cited source of such a PDF was headed "Marie Curie.html". The file's name is taken
    instead, as for a PDF without a title; a real title stays."""
    pdf_writer(tmp_path / "Marie Curie.pdf", ["Marie Curie shared the 1903 Nobel Prize in Physics."], title=title)
    pdf_writer(tmp_path / "jazz.pdf", ["Jazz began in New Orleans."], title="Jazz report")
    out = create("sources.files", {"path": str(tmp_path)})(pa.table({}))
    assert out.column("title").to_pylist() == ["Marie Curie", "Jazz report"]
