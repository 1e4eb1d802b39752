"""What a client sends to an index (``serve.indices``): documents as JSON, files, ids to delete; and how an upload
becomes the JSONL file that its ingestion task reads.

A document is an id, a title, a text and scalar metadata (doc-store columns that metadata
filters read). A PDF gives a document per page with text, as ``sources.pdf`` reads it, with
its file name and page as metadata (what ``generate.references`` cites); a text, Markdown or
HTML file gives one document, as ``sources.files`` reads it (its title a Markdown file's first
heading or an HTML page's ``<title>``, an HTML page's text that of its body).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from operators.errors import SourceError
from operators.sources.file_text import SUFFIXES, text_document
from serve.errors import ApiError
from serve.schemas import Text, check_texts

#: Doc-store columns that ingestion or search writes itself; metadata cannot take these names.
RESERVED = frozenset({"_id", "id", "docno", "doc_id", "text", "title", "vector", "qid", "query", "score", "rank"})


class Document(BaseModel):
    """One document: its id, title and text, and metadata columns that filters can read."""

    model_config = ConfigDict(extra="forbid")

    id: Text = Field(min_length=1, max_length=200, description="The document's id, unique in the index; "
                     "its passages are `<id>#<n>`.")
    title: Text = Field("", max_length=1000, description="Title (embedded with the text, and matched by BM25).")
    text: Text = Field(min_length=1, description="The text; the index's ingest spec cuts it into passages.")
    metadata: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Extra doc-store columns (what metadata filters read), e.g. "
        "`{\"source\": \"handbook.pdf\", \"year\": 2024}`.")

    @field_validator("metadata")
    @classmethod
    def _columns(cls, metadata: dict[str, Any]) -> dict[str, Any]:
        for key in metadata:
            if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_]{0,63}", key) or key in RESERVED:
                raise ValueError(f"metadata key '{key}' is not a column name this index can take (a letter, then "
                                 f"letters, digits or _; none of {', '.join(sorted(RESERVED))})")
        check_texts([v for v in metadata.values() if isinstance(v, str)], "metadata value")
        return metadata


class DocumentsRequest(BaseModel):
    """``POST /v1/indices/{name}/documents``."""

    model_config = ConfigDict(extra="forbid")

    documents: list[Document] = Field(min_length=1, description="The documents to add (at most "
                                      "max_documents_per_request).")
    replace: bool = Field(False, description="A document whose id is in the index already replaces it (its old "
                          "passages go in the commit that adds the new ones); false: such ids are a 409.")
    spec: str | None = Field(None, description="For a new index: the built-in ingest spec that makes it "
                             "(`ingest`: passages of 256 tokens, MiniLM and BM25; `ingest_static`: the static "
                             "embedder). An existing index keeps its own; default `ingest`.")


class DeleteRequest(BaseModel):
    """``POST /v1/indices/{name}/delete``."""

    model_config = ConfigDict(extra="forbid")

    ids: list[Text] = Field(min_length=1, max_length=10_000, description="Ids of the documents to delete.")


class ShareRequest(BaseModel):
    """``PATCH /v1/indices/{name}``."""

    model_config = ConfigDict(extra="forbid")

    shared: bool = Field(description="true: every key may search the index and list its documents; false: only "
                         "the key that made it (the default for a new index).")


def given_once(documents: list[Document]) -> None:
    seen: dict[str, int] = {}
    for i, doc in enumerate(documents):
        if doc.id in seen:
            raise ApiError(422, f"documents.{i}.id: '{doc.id}' is given twice (also documents.{seen[doc.id]})",
                           param="documents", code="duplicate_id")
        seen[doc.id] = i


#: The text files ``POST /v1/indices/{name}/files`` takes besides PDFs (JSON and JSONL documents go to
#: ``.../documents``): plain text, Markdown and HTML, each read as ``sources.files`` reads it
#: (``operators.sources.file_text``), so an upload and ``tessera ingest`` of a file give the same document.
TEXT_SUFFIXES = SUFFIXES


def file_documents(filename: str, content: bytes, limits: Any) -> list[dict[str, Any]]:
    """The documents of one uploaded file, with its name (and page) as metadata, as ``sources.pdf`` reads a PDF
    (in a child process, within ``limits.max_pdf_seconds``: ``serve/pdf_reading.py``); a 422 naming the file
    when it gives none."""
    from serve.pdf_reading import pdf_pages

    path = Path(filename or "")
    if path.name != filename or not filename:
        raise ApiError(422, f"files: '{filename}' is not a file name", param="files", code="invalid_file")
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        try:
            title, pages = pdf_pages(content, filename, seconds=limits.max_pdf_seconds,
                                     max_pages=limits.max_documents_per_request)
        except SourceError as err:
            raise ApiError(422, f"files: {err.message}", param="files", code="invalid_file") from None
        documents = [{"id": f"{path.stem}-p{n}", "title": title or path.stem, "text": text,
                      "metadata": {"path": filename, "page": n}} for n, text in enumerate(pages, start=1) if text]
        if not documents:
            raise ApiError(422, f"files: no page of '{filename}' has a text layer (a scan?); nothing to index "
                           "(no OCR is done)", param="files", code="invalid_file")
        return documents
    if suffix in TEXT_SUFFIXES:
        try:
            title, text = text_document(filename, content)
        except SourceError as err:
            raise ApiError(422, f"files: {err.message}", param="files", code="invalid_file") from None
        if not text.strip():  # sources.files reads no document from it either
            raise ApiError(422, f"files: '{filename}' has no text (an HTML page's is that of its body, without "
                           "scripts and styles); nothing to index", param="files", code="invalid_file")
        return [{"id": filename, "title": title or path.stem, "text": text, "metadata": {"path": filename}}]
    kinds = ", ".join((".pdf", *TEXT_SUFFIXES))
    raise ApiError(422, f"files: '{filename}' is not a PDF, text, Markdown or HTML file ({kinds}); send JSON or "
                   "JSONL documents to /v1/indices/{name}/documents", param="files", code="invalid_file")


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
