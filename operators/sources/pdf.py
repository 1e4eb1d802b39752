"""PDF document source."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any, Iterator, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from operators.base import Source
from operators.errors import SourceError
from operators.local_files import local_path
from operators.sources._common import rebatch
from operators.sources.paths import relative_name, resolve_paths

log = logging.getLogger("tessera.sources")

SCHEMA = pa.schema([("docno", pa.string()), ("title", pa.string()), ("text", pa.string()), ("path", pa.string()),
                    ("page", pa.int64())])


class PdfSource(Source):
    """Read the text layer of PDF files (pypdf): a document per page, or per file.

    Per page, ``docno`` is ``<name>-p<page>`` and ``page`` the page number (from 1); per file,
    ``docno`` is the name and ``page`` null. The name is the file's path from the folder, or
    from a glob's folders before its first wildcard, without its suffix: the file stem for a
    file of that folder (``report``), ``a/report`` for ``pdfs/a/report.pdf`` read by
    ``pdfs/**/*.pdf``, so files of the same name in two folders keep apart. ``path`` is that
    path with the suffix (``a/report.pdf``). ``title`` is the PDF's own title, else the file
    stem. ``path`` and ``page`` are the columns ``generate.references`` cites a PDF by. A page
    without text (a scan, a figure) is skipped and counted in the log: the text layer is read, no
    OCR is done. A file pypdf cannot read is an error naming it.

    Usage::

        PdfSource({"path": "handbook.pdf"})(pa.table({}))
        # docno ["handbook-p1", "handbook-p2", ...], title, text, path ["handbook.pdf", ...], page [1, 2, ...]
    """

    name = "sources.pdf"
    requires_packages = {"pypdf": "pdf"}  # operators/extras.py

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")

        path: str = Field(..., min_length=1, json_schema_extra=local_path(),
                          description="A PDF file, a glob (`docs/*.pdf`) or a folder of them.")
        unit: Literal["page", "document"] = Field(
            "page", description="`page`: a document per page (citations name the page); `document`: one per file, "
            "its pages' text joined by blank lines.")
        limit: int | None = Field(None, gt=0, description="Read only the first N documents, in file order.")
        batch_rows: int = Field(1000, gt=0, description="Most rows in one emitted table.")

    def produces(self) -> dict[str, str]:
        return {"docno": "id", "text": "text"}

    def _paths(self) -> list[Path]:
        return resolve_paths(self.params.path, op=self, suffixes=(".pdf", ".PDF"))

    def splits(self) -> list[str | None]:
        return [None] if self.params.limit is not None else [str(p) for p in self._paths()]

    def read(self, split: str | None) -> Iterator[pa.Table]:
        paths = [Path(split)] if split is not None else self._paths()
        tables = (pa.Table.from_pylist(self._documents(path), schema=SCHEMA) for path in paths)
        yield from rebatch(tables, self.params.batch_rows, self.params.limit)

    def _documents(self, path: Path) -> list[dict[str, Any]]:
        return pdf_documents(path, relative_name(path, self.params.path), self.params.unit, op=self)


def pdf_documents(path: Path, name: str, unit: str, *, op: Any = None) -> list[dict[str, Any]]:
    """The documents of the PDF at ``path`` named ``name`` (``relative_name``): one per page with text
    (``<name without .pdf>-p<page>``), or one for the file (``unit="document"``)."""
    title, pages = read_pdf(path, op=op)
    stem, docno = path.stem, name[: len(name) - len(path.suffix)]
    empty = sum(1 for text in pages if not text)
    if pages and empty == len(pages):  # a scan: said where it is shown, as a text file without text is
        log.warning("%s: no text layer on any of its %d page(s) (a scan? the text layer is read, no OCR is done): "
                    "no document", name, len(pages))
    elif empty:
        log.info("%s: %d of %d page(s) have no text layer (scans or figures): skipped", name, empty, len(pages))
    if unit == "document":
        text = "\n\n".join(t for t in pages if t)
        return [{"docno": docno, "title": title or stem, "text": text, "path": name, "page": None}] if text else []
    return [{"docno": f"{docno}-p{n}", "title": title or stem, "text": text, "path": name, "page": n}
            for n, text in enumerate(pages, start=1) if text]


#: A PDF title that names no document: a file name or address a program wrote for want of one (Chromium's "Save as
#: PDF" of a page without a <title> writes "report.html", Word "Microsoft Word - report.docx"), or "Untitled".
_NO_TITLE = re.compile(r"(?i)^(?:untitled(?:[ _-]*(?:\d+|document))?|microsoft (?:word|powerpoint|excel) - .*"
                       r"|[a-z][a-z0-9+.-]*://\S*|.*\.(?:html?|xhtml|php|aspx?|pdf|docx?|odt|rtf|txt|md|tex|pptx?|odp"
                       r"|xlsx?|ods|pages|key|indd|qxd|ps|dvi))$")


def own_title(title: Any) -> str | None:
    """A PDF's metadata title, stripped, or None where it has none or only a file name, address or "Untitled" (the
    reader then takes the file's own name: "Marie Curie", not "Marie Curie.html", cited in every answer)."""
    if not isinstance(title, str) or not title.strip() or _NO_TITLE.match(title.strip()):
        return None
    return title.strip()


class TooManyPages(SourceError):
    """A PDF with more pages than one read may take; ``pages``: how many it has, so that a client (the web UI) can
    send it again in parts (the service's ``first_page``)."""

    def __init__(self, message: str, pages: int) -> None:
        super().__init__(message)
        self.pages = pages


def read_pdf(source: Any, *, op: Any = None, name: str | None = None, max_pages: int | None = None,
             first_page: int | None = None) -> tuple[str | None, list[str]]:
    """The title (from the PDF's metadata, if any: ``own_title``) and each page's text (stripped; "" without a text
    layer) of ``source``, a path or a binary stream; a file pypdf cannot read, or one encrypted with a user password
    (one with an owner password alone is read, as viewers open it), is a ``SourceError`` naming it. Without
    ``first_page``, a file of more than ``max_pages`` pages (counted before any is read) is a ``TooManyPages``;
    with it, the pages from ``first_page`` (1-based), at most ``max_pages`` of them, are read: a part of a long
    PDF, as a client sends one in several requests."""
    try:
        from pypdf import PdfReader
        from pypdf.errors import PyPdfError
    except ImportError as err:
        raise SourceError("reading PDFs needs pypdf: pip install 'tessera[pdf]'", op=getattr(op, "name", None),
                          step=getattr(op, "step_id", None)) from err
    # pypdf logs what it repairs ("EOF marker not found") as bare lines before the file's own failure or warning
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    where = name or str(source)
    if isinstance(source, (str, os.PathLike)):  # a file this user may not open is not "damaged or not a PDF"
        try:
            with open(source, "rb"):
                pass
        except OSError as err:
            raise SourceError(f"{where}: cannot read it ({err.strerror or err})", op=getattr(op, "name", None),
                              step=getattr(op, "step_id", None)) from err
    try:
        reader = PdfReader(source)
        if reader.is_encrypted and not reader.decrypt(""):  # an owner password alone: opened as a viewer opens it
            raise SourceError(f"{where}: the PDF is encrypted with a password; decrypt it first (qpdf --decrypt "
                              "--password=PASSWORD IN.pdf OUT.pdf)", op=getattr(op, "name", None),
                              step=getattr(op, "step_id", None))
        count = len(reader.pages)
        if first_page is not None and first_page > count:
            raise SourceError(f"{where}: first_page {first_page} is past its last page ({count:,})", field="first_page")
        if first_page is None and max_pages is not None and count > max_pages:
            raise TooManyPages(f"{where}: {count:,} pages, over the {max_pages:,} documents one upload may add "
                               "(max_documents_per_request); send it in parts (first_page)", count)
        start = (first_page or 1) - 1
        pages = reader.pages[start:start + max_pages if max_pages is not None else count]
        title = (reader.metadata.title if reader.metadata else None) or None
        return (own_title(title), [(page.extract_text() or "").strip() for page in pages])
    except (PyPdfError, ValueError, KeyError, OSError) as err:
        # the reader's own words, without its exception's class name (``PdfStreamError: ...`` read as a program's
        # fault to whoever uploaded the file); a KeyError's is a bare key, which says nothing
        detail = f"; the reader found: {err}" if str(err) and not isinstance(err, KeyError) else ""
        raise SourceError(f"{where}: cannot read as a PDF: the file is damaged or is not a PDF{detail}",
                          op=getattr(op, "name", None), step=getattr(op, "step_id", None)) from err
