"""An uploaded CSV file's rows as documents (``POST /v1/indices/{name}/files``), read by the reader ``tessera ingest``
reads a CSV with (``sources.csv``: ``operators.sources.csv``), so a file gives the same documents either way.

A row is a document: its id from the column ``_id``, else ``docno``, ``id`` or ``doc_id`` (a row without one gets a
content id), its text from ``text`` and its title from ``title``; the other columns are its metadata, with the
values ``tessera ingest`` reads (numbers, true/false, text; a date or time as its ISO text, since a document sent as
JSON has no dates), a column whose name no metadata column may have left out, said in the answer's ``warnings``, as
a Markdown file's front matter field is. A row without a text or title is left out, as ``tessera ingest`` leaves it
out (said in ``warnings`` too). Where ``tessera ingest`` records a bad row in the failure ledger and reads on, the
upload refuses the whole file, naming it and the row's line: nothing of the request is added, nothing in the index
is touched. A file of more rows than one request may add is a 422 ``too_many_rows`` giving their number, and is
sent in parts, as a PDF of many pages is: the file again with ``first_row``, each part its rows from there. Each part
checks every row of the file, so a bad row refuses the first part, before anything of the file is added.
"""

from __future__ import annotations

import datetime
import tempfile
from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from operators.unicode import blank
from serve.http.errors import ApiError, validation_message
from serve.indices.file_warnings import encoding_warning

#: What a message of ``sources.csv`` tells a ``tessera ingest`` user to do (a flag, a spec's param), and what an
#: upload's user can do instead: the first of these found ends the reason, and its advice follows.
_ADVICE = (
    ("; name the column that holds the text", "; an upload reads a row's text from its column 'text' (its id from "
     "'_id', 'docno', 'id' or 'doc_id', its title from 'title'): rename the column that holds it"),
    ("; read it with that delimiter", "; an upload reads fields separated by ',': save the file so"),
    ("; if the file's quotes are text", ""),
    ("; give the file's encoding", "; save it as UTF-8"),
)


def csv_documents(filename: str, content: bytes, max_documents: int, warnings: list[str],
                  validate: Callable[[dict[str, Any]], Any], first_row: int | None = None) -> list[dict[str, Any]]:
    """The documents of the CSV file ``filename`` (its ``content``), as dicts of the API's ``Document``, which
    ``validate`` checks (``Document.model_validate``: a ``ValidationError``); a 422 naming the file (and the line)
    for one that ``sources.csv`` cannot read a row of, that has no text column, gives no document, repeats an id or
    holds a row that is no valid document. Of a file of more than ``max_documents`` rows with a text, the part from
    the ``first_row``-th (``_part``). How the file was read that the client should know goes to ``warnings`` (with
    the first part)."""
    from operators.metadata_columns import RESERVED, metadata_fields, name_rule
    from operators.registry import create
    from operators.sources.csv_rows import LINE, BadRow
    from operators.sources.encoding import read_as

    documents: list[dict[str, Any]] = []
    lines: list[int] = []
    left_out: dict[str, None] = {}
    with tempfile.TemporaryDirectory(prefix="tessera-csv-") as folder:
        path = Path(folder) / _local_name(filename)  # the service's log names the file by it
        path.write_bytes(content)
        source = create("sources.csv", {"path": str(path)})
        for item in source.read_located(str(path)):
            if isinstance(item, BadRow):
                raise _refused(filename, item.line, item.reason)
            lines += item.table.column(LINE).to_pylist()
            for row in item.table.drop_columns([LINE]).to_pylist():
                docno, title, text = row.pop("docno"), row.pop("title", None), row.pop("text")
                kept, names = metadata_fields({key: _plain(value) for key, value in row.items()}, RESERVED)
                left_out.update(dict.fromkeys(names))
                documents.append({"id": docno, "title": title or "", "text": text, "metadata": kept})
        skipped = int(source.drain_usage().get("empty_texts", 0))
        guessed, stray = read_as(source, str(path))
    # the line decoder knows a stray byte's line only, not its offset in the file
    encoding = encoding_warning(filename, guessed, None if stray is None else (None, stray))
    if not documents:
        raise ApiError(422, f"files: '{filename}' has no row with a text (a header row and its rows: a column "
                       "'text'); nothing to index", param="files", code="invalid_file")
    _check_rows(filename, documents, lines, validate)
    documents = _part(filename, documents, max_documents, first_row)
    if (first_row or 1) > 1:  # said with the first part
        return documents
    if encoding is not None:
        warnings.append(encoding)
    if left_out:
        warnings.append(f"{filename}: column(s) {', '.join(left_out)} left out: {name_rule(RESERVED)}")
    if skipped:
        warnings.append(f"{filename}: {skipped} row(s) without a text or a title left out, as tessera ingest leaves "
                        "them out")
    return documents


def _part(filename: str, documents: list[dict[str, Any]], max_documents: int,
          first_row: int | None) -> list[dict[str, Any]]:
    """The documents of a file's part from its ``first_row``-th row with a text, ``max_documents`` at most; a 422
    ``too_many_rows`` with their number (``rows``) for a whole file of more, and one naming ``first_row`` for a part
    that starts past the last row."""
    if first_row is None:
        if len(documents) > max_documents:
            raise ApiError(422, f"files: '{filename}' has {len(documents)} rows with a text, over the limit "
                           f"max_documents_per_request={max_documents}; send it in parts, each with the form field "
                           f"first_row (1, then {1 + max_documents}, ...), as the web UI does", param="files",
                           code="too_many_rows", extra={"rows": len(documents)})
        return documents
    if first_row > len(documents):
        raise ApiError(422, f"first_row: {first_row} is past the last of the {len(documents)} rows with a text of "
                       f"'{filename}'", param="first_row", code="invalid_value")
    return documents[first_row - 1:first_row - 1 + max_documents]


def _refused(filename: str, line: int | None, reason: str) -> ApiError:
    """The 422 of a file ``sources.csv`` reads no documents from, or a bad row of (``line``), with the advice for an
    upload in place of that for ``tessera ingest``."""
    for said, advice in _ADVICE:
        if said in reason:
            reason = reason[:reason.index(said)] + advice
            break
    where = f"{filename}, line {line}" if line is not None else filename
    return ApiError(422, f"files: {where}: {reason}; nothing of this request was added", param="files",
                    code="invalid_file")


def _check_rows(filename: str, documents: list[dict[str, Any]], lines: list[int],
                validate: Callable[[dict[str, Any]], Any]) -> None:
    """A 422 naming the row's line for a document the API would refuse (an id too long, a value no metadata column
    takes), and for an id two rows give (``tessera ingest`` fails the second: an upload is all or nothing)."""
    first: dict[str, int] = {}
    for document, line in zip(documents, lines):
        if blank(document["text"]):  # a title alone, which tessera ingest indexes
            raise _refused(filename, line, "the row has a title and no text; an uploaded document needs a text")
        try:
            validate(document)
        except ValidationError as err:
            message, _ = validation_message(list(err.errors()))
            raise _refused(filename, line, message) from None
        if document["id"] in first:
            raise _refused(filename, line, f"the id '{document['id']}' is given twice (also line "
                           f"{first[document['id']]})")
        first[document["id"]] = line


def _plain(value: Any) -> Any:
    """A CSV value as a document's metadata holds it: a date or time (which pyarrow reads ISO text as) as its ISO
    text."""
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return value


def _local_name(filename: str) -> str:
    """The name of an uploaded file's temporary copy: the client's own, which the reader's warnings in the service's
    log then name (``file_documents`` let only a file name ending in .csv, without a NUL, come here), unless too long
    for the file system."""
    return filename if len(filename.encode()) <= 200 else "upload.csv"
