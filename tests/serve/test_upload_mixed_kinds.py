"""An upload whose metadata values under one name are of kinds no one column type holds (numbers and text) makes that
column text, as ingestion does (``values_to_array``); the upload's answer (the 202's body, which the web UI shows after
an Add) now says so in its ``warnings``, naming the field and a document of each kind, where before the client learnt
it only when a filter compared text. Integers beside floats merge to a float column and are not warned of.

Real uploads accepted by ``Service`` (``Indices.add``, ``add_files``: what the two routes answer, without the launch on
Ray), a real SQLite task store; the one queued ingested by the task's own code (``run_ingest``) with MiniLM in this
process."""

from __future__ import annotations

import pyarrow as pa
import pytest

from operators.store import Index
from serve.indices.documents import DocumentsRequest
from serve.tasks.ingest_task import run_ingest

pytestmark = pytest.mark.integration  # MiniLM loads in this process

YEAR_WARNING = ("metadata 'year' holds a number in '{}' (1999), a string in '{}' (\"unknown\"): its column is text, "
                "every value as written ('1999' for 1999), and a filter on it compares text; send one kind to keep "
                "numbers as numbers")


def add(service, name: str, documents: list[dict]) -> dict:
    return service.indices.add(name, DocumentsRequest.model_validate({"documents": documents}), "local")


def test_numbers_and_text_under_one_name_are_a_warning_and_the_column_is_text(upload_service):
    queued = add(upload_service, "notes", [
        {"id": "old", "text": "an old note", "metadata": {"year": 1999, "kind": "note"}},
        {"id": "undated", "text": "a note of no known year", "metadata": {"year": "unknown", "kind": "note"}},
        {"id": "new", "text": "a new note", "metadata": {"year": 2024}}])
    assert queued["warnings"] == [YEAR_WARNING.format("old", "undated")]
    assert "warnings" not in add(upload_service, "floats", [{"id": "a", "text": "a", "metadata": {"rating": 1}},
                                                            {"id": "b", "text": "b", "metadata": {"rating": 2.5}}])

    run_ingest(upload_service.store, queued["task_id"], upload_service.store.task(queued["task_id"], None)["spec"]
               ["ingest"])
    assert upload_service.store.task(queued["task_id"], None)["status"] == "finished"
    assert Index.open(upload_service.indices.folder / "notes").docs_schema().field("year").type == pa.string()


def test_files_whose_front_matter_mixes_kinds_say_so_beside_how_a_file_was_read(upload_service):
    files = [("dated.md", b"---\nyear: 1999\n---\n# Dated\n\nA note of 1999.\n"),
             ("undated.md", b"---\nyear: unknown\n---\n# Undated\n\nA note of no known year.\n"),
             ("menu.txt", "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e, cr\u00eape".encode("cp1252"))]
    queued = upload_service.indices.add_files("notes", files, None, False, "local")
    assert len(queued["warnings"]) == 2, queued
    assert queued["warnings"][0].startswith("menu.txt: not UTF-8; read as ")  # the file's, then the upload's
    assert queued["warnings"][1] == YEAR_WARNING.format("dated.md", "undated.md")


def test_the_warning_quotes_this_uploads_values_in_json():
    """It quoted Python's spelling (True) and always the example 1999, whatever was sent."""
    from serve.indices.documents import Document
    from serve.indices.index_reading import mixed_kind_warnings

    docs = [Document.model_validate({"id": "c", "text": "gamma", "metadata": {"flag": True}}),
            Document.model_validate({"id": "d", "text": "delta", "metadata": {"flag": 1}})]
    [said] = mixed_kind_warnings(docs)
    assert said.startswith("metadata 'flag' holds true/false in 'c' (true), a number in 'd' (1): its column is text, "
                           "every value as written ('1' for 1)"), said
