"""Document files source: a folder (or glob) of PDF, plain text, Markdown and HTML files, each read by its kind."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Iterator, Literal

import pyarrow as pa
from pydantic import Field

from operators.errors import SourceError, SourceNotFoundError
from operators.local_files import local_path
from operators.sources._common import rebatch, values_to_array
from operators.sources.csv import SUFFIXES as CSV_SUFFIXES
from operators.sources.encoding import ENCODING_HELP, encoding_param, warn_of_file
from operators.sources.file_text import SUFFIXES as TEXT_KINDS
from operators.sources.file_text import read_text_file
from operators.sources.jsonl import SUFFIXES as JSONL_SUFFIXES
from operators.sources.parquet import SUFFIXES as PARQUET_SUFFIXES
from operators.sources.paths import is_glob, once_each, resolve_paths, subfolder_glob, warn_dangling, warn_subfolders
from operators.sources.pdf import SCHEMA, PdfSource, pdf_documents, relative_name

log = logging.getLogger("tessera.sources")

#: Every suffix this source reads (case does not matter): PDFs, then the text kinds.
SUFFIXES = (".pdf", *TEXT_KINDS)


#: Files of records, which other sources read (``sources.csv``, ``sources.jsonl``, ``sources.parquet``).
RECORD_SUFFIXES = (*CSV_SUFFIXES, *JSONL_SUFFIXES, *PARQUET_SUFFIXES)


def _suffix(path: Path) -> str:
    return next(s for s in RECORD_SUFFIXES if path.name.lower().endswith(s))


def is_document_file(name: str | Path) -> bool:
    return Path(name).suffix.lower() in SUFFIXES


class FilesSource(PdfSource):  # its splits, read and batching; files of every kind
    """Read document files, each by its kind: a PDF a document per page (as ``sources.pdf``), a plain text,
    Markdown or HTML file one document.

    For a folder of mixed files (``docs/`` holding ``.pdf``, ``.txt``, ``.md``, ``.html``); files of other
    suffixes are named in one warning line and not read, nor are hidden files and subfolders (give a glob,
    ``docs/**/*``). A text file's ``docno`` and ``path`` are its path from the folder (or from a glob's folders
    before its first wildcard) with its suffix (``notes.md``, ``a/notes.md``), so ``notes.txt`` and ``notes.md``
    stay two documents; its ``title`` is a Markdown file's front matter's ``title:`` or first heading, an HTML
    file's ``<title>`` (else its first ``<h1>``), else the file stem; a Markdown file's front matter's other fields
    are columns of its own, as the service's upload makes them metadata (``metadata_columns.metadata_fields``: a
    list its JSON text, a field no metadata column may be named after left out, named in a warning), and the front
    matter is not in its text;
    an HTML file's text is its body's, without scripts, styles and the page's furniture (``html_text``); ``page`` is
    null. A PDF's rows are those of
    ``sources.pdf``. Text is read as UTF-8: a file that is not is an error naming it (one failure of
    that file in an ingestion). A file with no text gives no document, and says so in the log.

    Usage::

        FilesSource({"path": "docs"})(pa.table({}))
        # docno ["guide-p1", "notes.md", "faq.html"], title, text, path ["guide.pdf", "notes.md", "faq.html"], page
    """

    name = "sources.files"
    reads_lines = False  # a text file is decoded whole: any encoding Python knows, UTF-16 too

    class Params(PdfSource.Params):  # the PDF source's (limit, batch_rows), its path and unit said anew
        path: str = Field(..., min_length=1, json_schema_extra=local_path(),
                          description="A file, a glob (`docs/*.md`, `docs/**/*`) or a folder of document files "
                          f"({', '.join(SUFFIXES)}).")
        unit: Literal["page", "document"] = Field(
            "page", description="For PDFs: `page`, a document per page; `document`, one per file. Any other "
            "file is one document.")
        encoding: str | None = Field(None, description=ENCODING_HELP + " PDFs are read by pypdf, whatever it is.")
        _encoding = encoding_param()

    def _paths(self) -> list[Path]:
        """The files to read; those of other kinds in a folder or glob are named in one warning (once)."""
        path = Path(os.path.expanduser(self.params.path))
        folders: list[Path] = []
        if path.is_dir():
            named = [p for p in path.iterdir() if not p.name.startswith(".")]
            warn_dangling(named, self)
            found = once_each(sorted(p for p in named if p.is_file()), path, self)  # a link to a file beside it: once
            folders = sorted(p for p in named if p.is_dir())
        elif is_glob(str(path)):
            found = resolve_paths(self.params.path, op=self)
        else:
            [file] = resolve_paths(self.params.path, op=self)  # a missing file is an error naming it
            if not is_document_file(file):
                raise SourceError(f"'{file}' is not a document file of a kind this source reads "
                                  f"({', '.join(SUFFIXES)})", op=self.name, step=self.step_id, field="params.path")
            return [file]
        readable = [p for p in found if is_document_file(p)]
        records = [p for p in found if p.name.lower().endswith(RECORD_SUFFIXES)]
        others = [p for p in found if not is_document_file(p) and p not in records]
        if not readable:
            below = (f"; its {len(folders)} subfolder(s) are not read (a glob reads them too: "
                     f"'{subfolder_glob(self.params.path)}')" if folders else "")
            raise SourceNotFoundError(f"'{self.params.path}' holds no document file ({', '.join(SUFFIXES)}) among "
                                      f"its {len(found)} file(s){below}", op=self.name, step=self.step_id,
                                      field="params.path")
        if (others or folders or records) and not getattr(self, "_warned", False):
            self._warned = True
            if records:  # "of a kind no reader takes" they were said to be: their readers are other sources
                shown = ", ".join(relative_name(p, self.params.path) for p in records[:10])
                log.warning("%s: %d file(s) of records not read with the documents: %s%s (ingest them as a source of "
                            "their own, a glob of them: '%s')", self.params.path, len(records), shown,
                            ", ..." if len(records) > 10 else "", records[0].parent / f"*{_suffix(records[0])}")
            if others:
                shown = ", ".join(relative_name(p, self.params.path) for p in others[:10])
                log.warning("%s: %d file(s) not read, of a kind no reader takes: %s%s (read: %s)", self.params.path,
                            len(others), shown, ", ..." if len(others) > 10 else "", ", ".join(SUFFIXES))
            if folders:  # a folder's own files only: a user who put documents in a subfolder is told where they went
                warn_subfolders(self.params.path, folders)
        return readable

    def read(self, split: str | None) -> Iterator[pa.Table]:
        paths = [Path(split)] if split is not None else self._paths()
        yield from rebatch((_table(self._documents(path)) for path in paths), self.params.batch_rows,
                           self.params.limit)

    def _documents(self, path: Path) -> list[dict[str, Any]]:
        name = relative_name(path, self.params.path)
        if path.suffix.lower() == ".pdf":
            return pdf_documents(path, name, self.params.unit, op=self)
        document = read_text_file(name, path.read_bytes(), op=self, encoding=self.params.encoding)
        if not document.has_text:
            said = self.__dict__.setdefault("_no_text", set())  # a sync reads the source again: said once
            if name not in said:
                said.add(name)
                log.warning("%s: no text: no document", name)
            return []
        for message in (document.left_out_message(name), document.table_message(name)):
            if message:
                warn_of_file(self, name, message)  # logged if its document is staged
        return [{**document.fields, "docno": name, "title": document.title or path.stem, "text": document.text,
                 "path": name, "page": None}]


def _table(documents: list[dict[str, Any]]) -> pa.Table:
    """A file's documents: the columns of ``SCHEMA``, then its other fields (a Markdown file's front matter's)."""
    table = pa.Table.from_pylist(documents, schema=SCHEMA)
    for name in dict.fromkeys(k for doc in documents for k in doc if k not in SCHEMA.names):
        table = table.append_column(name, values_to_array([doc.get(name) for doc in documents]))
    return table
