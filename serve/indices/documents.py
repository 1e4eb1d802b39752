"""What a client sends to an index (``serve.indices.indices``): documents as JSON, files, ids to delete; and how an
upload becomes the JSONL file that its ingestion task reads.

A document is an id, a title, a text and scalar metadata (doc-store columns that metadata
filters read). A PDF gives a document per page with text, as ``sources.pdf`` reads it, with
its file name and page as metadata (what ``generate.references`` cites); a text, Markdown or
HTML file gives one document, as ``sources.files`` reads it (its title a Markdown file's first
heading or an HTML page's ``<title>``, an HTML page's text that of its body); a CSV file gives a document per row, as
``sources.csv`` reads it (``serve.indices.csv_upload``).
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Annotated, Any, Iterator

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from operators import metadata_columns
from operators.errors import SourceError
from operators.unicode import blank, unicode_problem
from operators.sources.file_text import HTML_SUFFIXES, SUFFIXES, read_text_file
from serve.http.errors import ApiError
from serve.indices.file_warnings import encoding_warning
from serve.schemas import Text

#: Doc-store columns that ingestion or search writes itself; metadata cannot take these names.
RESERVED = metadata_columns.RESERVED
#: The longest document id; a file's documents take theirs from its name.
MAX_ID_LENGTH = 200
#: A metadata integer is an int64 column of the doc store.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _column_name(key: str) -> str:
    """A metadata key is a doc-store column; an error on it names it (``documents.3.metadata.text``)."""
    if not metadata_columns.is_metadata_name(key):
        raise ValueError(f"metadata key '{key}' is not a column name this index can take (an ASCII letter, "
                         f"then ASCII letters, digits or _, 64 at most; none of {', '.join(sorted(RESERVED))}, nor "
                         f"starting with {' or '.join(metadata_columns.RANKING_PREFIXES)}, which a search writes)")
    return key


def _storable(value: Any) -> Any:
    """What a doc-store column can hold, not what it would silently change."""
    if isinstance(value, str) and unicode_problem(value):
        raise ValueError(f"the metadata value {unicode_problem(value)}")
    if isinstance(value, float) and not math.isfinite(value):  # JSON's NaN, Infinity, 1e400: listed as null
        raise ValueError(f"metadata value {value} is not a number a filter can compare; send a finite number, or "
                         "leave the key out")
    if isinstance(value, int) and not isinstance(value, bool) and not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"metadata value {value} is beyond a 64-bit integer (at most {INT64_MAX:,} either way); "
                         "send it as a string")  # it would be stored as its digits, as text
    return value


MetadataKey = Annotated[str, AfterValidator(_column_name)]
MetadataValue = Annotated[str | int | float | bool, AfterValidator(_storable)]


class Document(BaseModel):
    """One document: its id, title and text, and metadata columns that filters can read."""

    model_config = ConfigDict(extra="forbid")

    id: Text = Field(min_length=1, max_length=MAX_ID_LENGTH, description="The document's id, unique in the index; "
                     "its passages are `<id>#<n>`.")
    title: Text = Field("", max_length=1000, description="Title (embedded with the text, and matched by BM25).")
    text: Text = Field(min_length=1, description="The text; the index's ingest spec cuts it into passages.")
    metadata: dict[MetadataKey, MetadataValue] = Field(
        default_factory=dict, description="Extra doc-store columns (what metadata filters read), e.g. "
        "`{\"source\": \"handbook.pdf\", \"year\": 2024}`.")

    @field_validator("id")
    @classmethod
    def _id_has_text(cls, doc_id: str) -> str:
        if blank(doc_id):  # ingestion reads a blank id as none and gives a content id the client never sent
            raise ValueError("the id is blank: give each document an id with a character that is not a space")
        if doc_id in (".", ".."):  # GET .../documents/.. is the index's path (URLs resolve dot segments): unreadable
            raise ValueError(f"the id '{doc_id}' cannot be read back (a URL takes it as a step of its path): give "
                             "another id")
        return doc_id

    @field_validator("text")
    @classmethod
    def _text_or_title(cls, text: str, info: ValidationInfo) -> str:
        if blank(text) and blank(str(info.data.get("title") or "")):  # ingestion would leave it out
            raise ValueError("the text is blank and there is no title: there is nothing to index")
        return text

    @field_validator("metadata", mode="before")
    @classmethod
    def _null_is_no_field(cls, metadata: Any) -> Any:
        """A null value is a field the document does not have (as in front matter and JSONL), not four errors of
        the value union that named no null."""
        return {k: v for k, v in metadata.items() if v is not None} if isinstance(metadata, dict) else metadata


class DocumentsRequest(BaseModel):
    """``POST /v1/indices/{name}/documents``."""

    model_config = ConfigDict(extra="forbid")

    documents: list[Document] = Field(min_length=1, description="The documents to add (at most "
                                      "max_documents_per_request).")
    replace: bool = Field(False, strict=True, description="A document whose id is in the index already replaces it "
                          "(its old passages go in the commit that adds the new ones); false: such ids are a 409.")
    spec: str | None = Field(None, description="For a new index: the built-in ingest spec that makes it "
                             "(`ingest`: passages of 200 MiniLM word pieces, MiniLM and BM25; `ingest_static`: the "
                             "static embedder). An existing index keeps its own; default `ingest`.")


class DeleteRequest(BaseModel):
    """``POST /v1/indices/{name}/delete``."""

    model_config = ConfigDict(extra="forbid")

    ids: list[Text] = Field(min_length=1, max_length=10_000, description="Ids of the documents to delete.")


class ShareRequest(BaseModel):
    """``PATCH /v1/indices/{name}``."""

    model_config = ConfigDict(extra="forbid")

    shared: bool = Field(strict=True, description="true: every key may search the index and list its documents; "
                         "false: only the key that made it (the default for a new index).")


def given_once(documents: list[Document]) -> None:
    seen: dict[str, int] = {}
    for i, doc in enumerate(documents):
        if doc.id in seen:
            raise ApiError(422, f"documents.{i}.id: '{doc.id}' is given twice (also documents.{seen[doc.id]})",
                           param=f"documents.{i}.id", code="duplicate_id")
        seen[doc.id] = i


@contextlib.contextmanager
def sent_as_files() -> Iterator[None]:
    """An upload's refusal naming its documents (``documents_exist``, an id given twice) names ``files``, the
    field the client sent them in."""
    try:
        yield
    except ApiError as err:
        if (err.param or "").split(".")[0] == "documents":
            err.param = "files"
        raise


#: The text files ``POST /v1/indices/{name}/files`` takes besides PDFs (JSON and JSONL documents go to
#: ``.../documents``): plain text, Markdown and HTML, each read as ``sources.files`` reads it
#: (``operators.sources.file_text``), so an upload and ``tessera ingest`` of a file give the same document.
TEXT_SUFFIXES = SUFFIXES


def files_request(files: list[tuple[str, bytes]], spec: str | None, replace: bool, first_page: int | None,
                  limits: Any, first_row: int | None = None) -> tuple[DocumentsRequest, list[str], list[str]]:
    """The documents of uploaded files as one request, the files whose earlier documents it replaces (with
    ``replace``): every file, but a part of a PDF or CSV file after its first (``first_page`` or ``first_row`` > 1),
    which must not take away the parts sent before it; and the warnings for the client (``file_documents``)."""
    from pydantic import ValidationError

    from serve.http.errors import validation_message

    if not files:
        raise ApiError(422, "files: send at least one file (multipart field `files`; a form whose last part has no "
                       "closing boundary holds none)", param="files", code="invalid_value")
    for field, value, kind in (("first_page", first_page, "PDF"), ("first_row", first_row, "CSV")):
        if value is not None and (len(files) != 1 or not files[0][0].lower().endswith(f".{kind.lower()}")):
            raise ApiError(422, f"{field}: a part of a {kind} file is sent with that file alone", param=field,
                           code="invalid_value")
    warnings: list[str] = []
    documents = [doc for filename, content in files
                 for doc in file_documents(filename, content, limits, first_page, warnings, first_row)]
    for doc in documents:  # a file's documents take their ids from its name, which the client sent as `files`
        if len(doc["id"]) > MAX_ID_LENGTH:
            name = doc["metadata"]["path"]
            raise ApiError(422, f"files: the name of '{name[:40]}...' ({len(name)} characters) makes a document id "
                           f"of {len(doc['id'])} characters, and an id has at most {MAX_ID_LENGTH}: rename the file",
                           param="files", code="invalid_file")
    try:
        request = DocumentsRequest.model_validate({"documents": documents, "spec": spec, "replace": replace})
    except ValidationError as err:
        message, param = validation_message(list(err.errors()))
        raise ApiError(422, message, param=param, code="invalid_value") from None
    return request, [] if (first_page or first_row or 1) > 1 else [filename for filename, _ in files], warnings


def file_documents(filename: str, content: bytes, limits: Any, first_page: int | None = None,
                   warnings: list[str] | None = None, first_row: int | None = None) -> list[dict[str, Any]]:
    """The documents of one uploaded file, with its name (and page) as metadata, as ``sources.pdf`` reads a PDF
    (in a child process, within ``limits.max_pdf_seconds``: ``serve/indices/pdf_reading.py``; from ``first_page``, a
    part of at most ``max_documents_per_request`` pages); a 422 naming the file when it gives none, and a 422
    ``too_many_pages`` with its ``pages`` for a PDF of more pages than one request may add (a CSV file's rows
    likewise: ``first_row``, ``too_many_rows``). What was read in a way the client should know (a guessed encoding,
    front matter left out) is added to ``warnings``."""
    from operators.sources.pdf import TooManyPages
    from serve.indices.pdf_reading import pdf_pages

    path = Path(filename or "")
    if path.name != filename or not filename or "\x00" in filename:  # a NUL: no file may be named so
        raise ApiError(422, f"files: '{filename}' is not a file name", param="files", code="invalid_file")
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        try:
            title, pages = pdf_pages(content, filename, seconds=limits.max_pdf_seconds,
                                     max_pages=limits.max_documents_per_request, first_page=first_page)
        except TooManyPages as err:
            raise ApiError(422, f"files: {err.message}", param="files", code="too_many_pages",
                           extra={"pages": err.pages}) from None
        except SourceError as err:
            raise ApiError(422, f"files: {err.message}", param=err.field or "files",
                           code="invalid_file") from None
        first = first_page or 1
        documents = [{"id": pdf_page_id(filename, n), "title": title or path.stem, "text": text,
                      "metadata": {"path": filename, "page": n}} for n, text in enumerate(pages, start=first) if text]
        if not documents and first_page is not None:  # a part of scans or figures: the client goes on to the next
            raise ApiError(422, f"files: pages {first}-{first + len(pages) - 1} of '{filename}' have no text layer; "
                           "nothing to index (no OCR is done)", param="files", code="no_text_layer")
        if not documents:
            raise ApiError(422, f"files: no page of '{filename}' has a text layer (a scan?); nothing to index "
                           "(no OCR is done)", param="files", code="invalid_file")
        return documents
    if suffix in TEXT_SUFFIXES:
        return [text_file_document(filename, content, [] if warnings is None else warnings)]
    if suffix == ".csv":  # a document a row, as tessera ingest reads it
        from serve.indices.csv_upload import csv_documents

        return csv_documents(filename, content, limits.max_documents_per_request, [] if warnings is None else warnings,
                             Document.model_validate, first_row)
    kinds = ", ".join((".pdf", *TEXT_SUFFIXES, ".csv"))
    raise ApiError(422, f"files: '{filename}' is not a PDF, text, Markdown, HTML or CSV file ({kinds}); send JSON or "
                   "JSONL documents to /v1/indices/{name}/documents", param="files", code="invalid_file")


def pdf_page_id(filename: str, page: int) -> str:
    """The id of page ``page`` of an uploaded PDF."""
    return f"{Path(filename).stem}-p{page}"


def made_from_file(doc_id: str, filename: str) -> bool:
    """Whether ``doc_id`` is an id an upload of the file ``filename`` gives (its name, or a PDF's page ids): what a
    file sent again with ``replace`` takes away, and not a JSON document whose ``metadata.path`` only names it."""
    if Path(filename).suffix.lower() != ".pdf":
        return doc_id == filename
    prefix = pdf_page_id(filename, 0)[:-1]  # "<stem>-p"
    page = doc_id[len(prefix):]
    return doc_id.startswith(prefix) and page.isascii() and page.isdigit()


def text_file_document(filename: str, content: bytes, warnings: list[str]) -> dict[str, Any]:
    """The document of a text, Markdown or HTML file, as ``sources.files`` reads it: a Markdown file's front matter
    its title and metadata (by the one rule of ``metadata_columns.metadata_fields``), a file that is not UTF-8 read
    in the encoding guessed for it. Both said in ``warnings``, for the client: a log line of the service is not
    read by whoever uploaded the file."""
    try:
        document = read_text_file(filename, content)
    except SourceError as err:
        raise ApiError(422, f"files: {err.message}", param="files", code="invalid_file") from None
    if not document.has_text:  # sources.files reads no document from it either
        page = (" (an HTML page's is that of its body, without scripts, styles and the site's menus, header and "
                "footer)" if Path(filename).suffix.lower() in HTML_SUFFIXES else "")
        raise ApiError(422, f"files: '{filename}' has no text{page}; nothing to index, nothing of this request "
                       "was added: send the other files without it", param="files", code="invalid_file")
    if message := encoding_warning(filename, document.guessed_encoding, document.stray_byte):
        warnings.append(message)
    warnings.extend(message for message in (document.left_out_message(filename), document.table_message(filename))
                    if message)
    return {"id": filename, "title": document.title or Path(filename).stem, "text": document.text,
            "metadata": {"path": filename, **document.fields}}


def write_jsonl(path: Path, documents: list[Document]) -> None:
    """The documents as BEIR JSONL (``_id``, ``title``, ``text``, metadata as more fields), for ``sources.jsonl``.

    Every record has every metadata key of the upload (null where a document has none), so each column's place
    and type come from the whole upload, whatever the order of its documents."""
    keys = list(dict.fromkeys(key for doc in documents for key in doc.metadata))
    with open(path, "w", encoding="utf-8") as out:
        for doc in documents:
            metadata = {key: doc.metadata.get(key) for key in keys}
            out.write(json.dumps({**metadata, "_id": doc.id, "title": doc.title, "text": doc.text},
                                 ensure_ascii=False) + "\n")
