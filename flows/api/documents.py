"""Documents a notebook holds in memory (a list of dicts, a pandas DataFrame, a pyarrow Table) as a source that
``ingest`` reads, and ``Index.add``/``update`` take: written to a Parquet file in a temporary folder, ingested, and
removed, as the service ingests an upload.

Why a file: the ingestion job stages, resumes and records failures by its source's documents, and reads them from a
file; its staging is keyed by their content, so the same documents given again find their shards done, wherever the
file was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable, Iterator

import pyarrow as pa

from operators.errors import short_repr

#: What the documents' file is called in its temporary folder (what a failure or a warning names).
FILE_NAME = "documents.parquet"


def in_memory(source: Any) -> bool:
    """Whether ``source`` is documents rather than a path or a read step: a list or tuple, a pyarrow Table or
    RecordBatch, a pandas DataFrame."""
    return isinstance(source, (list, tuple, pa.Table, pa.RecordBatch)) or _is_dataframe(source)


def materialized(source: Any) -> Any:
    """``source`` as ``ingest`` takes it: a generator or an iterator of documents as a list; another type than a
    path, a read step or documents refused in words that name documents too (the engine's name paths alone)."""
    if source is None or isinstance(source, (str, os.PathLike, dict)) or in_memory(source):
        return source
    if isinstance(source, Iterable) and not isinstance(source, (bytes, bytearray)):
        return list(source)
    from flows.ingestion.errors import IngestError

    raise IngestError(f"source is a file, a glob or a folder (str or pathlib.Path), a read step {{'op': ..., "
                      f"'params': ...}}, or documents: a list of dicts, a pandas DataFrame or a pyarrow Table; got "
                      f"{type(source).__name__} {short_repr(source)}", field="source")


def _is_dataframe(value: Any) -> bool:
    return type(value).__name__ == "DataFrame" and type(value).__module__.startswith("pandas")


def as_table(documents: Any, text_field: str | None = "text") -> pa.Table:
    """The documents as a table with a column each field, or an ``IngestError`` on ``source`` saying what is wrong
    (before anything is written: a missing text field failed every document into the ledger, naming a temporary
    file); ``text_field`` None: not checked."""
    from flows.ingestion.errors import IngestError

    if isinstance(documents, pa.RecordBatch):
        documents = pa.Table.from_batches([documents])
    elif _is_dataframe(documents):
        # a named index (df.set_index("_id")) is a column of its own; the default 0, 1, ... is not
        try:
            documents = pa.Table.from_pandas(documents)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as err:
            raise IngestError(f"the DataFrame's columns cannot be written as documents: {err}",
                              field="source") from None
    elif isinstance(documents, (list, tuple)):
        for place, record in enumerate(documents, 1):
            if not isinstance(record, dict):
                raise IngestError(f"source is a list of documents, each a dict such as {{'_id': 'd1', 'title': "
                                  f"'...', 'text': '...'}}; item {place} of {len(documents)} is "
                                  f"{type(record).__name__} {short_repr(record)} (a file, a glob or a folder is one "
                                  f"str or pathlib.Path)", field="source")
        try:
            documents = pa.Table.from_pylist(list(documents))
        except UnicodeEncodeError as err:  # a lone surrogate ("\ud800"): no file, index or answer can hold it
            raise IngestError(f"the documents hold text that is not valid Unicode ({err.reason}: "
                              f"{err.object[err.start:err.end]!r} at position {err.start} of "
                              f"{short_repr(err.object)})", field="source") from None
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as err:  # a field of mixed types
            raise IngestError(f"the documents' fields cannot be written as columns: {err} (a field must hold "
                              f"one type in every document)", field="source") from None
    if documents.num_rows == 0:
        raise IngestError("source holds no documents", field="source")
    if text_field is not None and text_field not in documents.column_names:
        raise IngestError(f"the documents have no field {text_field!r} (fields: {', '.join(documents.column_names)}): "
                          f"name the one that holds the text with fields={{'text_field': NAME}}", field="source")
    return documents


def checked_table(documents: Any, fields: Any = None) -> pa.Table:
    """``as_table`` with the text field ``fields`` (``ingest``'s) names; fields of another form (``{"text":
    "body"}``) are left to ``ingest``, which names the keys it takes."""
    text_field = _plain(fields).get("text_field", "text") if _plain(fields) is not None else None
    return as_table(documents, text_field if isinstance(text_field, str) else None)


def _plain(fields: Any) -> dict | None:
    """``fields`` where it is a dict of the keys ``ingest`` takes ({} for None), else None."""
    if fields is None:
        return {}
    return fields if isinstance(fields, dict) and set(fields) <= {"id_field", "text_field", "title_field"} else None


def document_ids(table: pa.Table, fields: Any = None) -> list[str]:
    """The ids the documents will have, as the reader takes them (``fields``' ``id_field``, else ``_id`` and its
    fallbacks); a document without one (its id made from its content) is left out."""
    from operators.sources._common import default_id

    id_field = (_plain(fields) or {}).get("id_field")
    ids = (row.get(id_field) if isinstance(id_field, str) else default_id(row) for row in table.to_pylist())
    return [str(value) for value in ids if value is not None and str(value).strip()]


@contextlib.contextmanager
def documents_file(documents: Any, fields: Any = None) -> Iterator[str]:
    """The documents written to a Parquet file, for as long as the ``with`` lasts; ``fields``: ``ingest``'s."""
    import pyarrow.parquet as pq

    table = checked_table(documents, fields)
    with tempfile.TemporaryDirectory(prefix="tessera-documents-") as folder:
        path = os.path.join(folder, FILE_NAME)
        pq.write_table(table, path)
        with _said_as(path, LABEL):
            yield str(Path(path))


#: What the ingestion's warnings call the documents, where they named the temporary file the caller never saw.
LABEL = "the documents given"


@contextlib.contextmanager
def _said_as(path: str, label: str) -> Iterator[None]:
    """While open, a warning of the reader's or the ingestion's (``skipped 1 document(s) with an empty text in
    PATH``, ``PATH: field(s) score are left out``) names ``label`` where it named ``path``, and the note that the
    documents were staged before (``RESENT``) is left out."""
    import logging

    from flows.ingestion.job import RESENT

    def rewrite(record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(RESENT):  # documents given again: add and update
            return False  # ingest them again, as asked; the note named the temporary file of the first time
        message = record.getMessage()
        if path in message:
            record.msg, record.args = message.replace(path, label), ()
        return True

    loggers = [logging.getLogger(name) for name in ("operators.sources", "tessera.ingest")]
    for logger in loggers:
        logger.addFilter(rewrite)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(rewrite)
