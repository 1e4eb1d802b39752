"""The multipart body of ``POST /v1/indices/{name}/files``, read by the route itself rather than by FastAPI's
``File``/``Form`` parameters.

FastAPI reads such a form with Starlette's defaults and answers what it cannot take with
messages that name no field: more than 1,000 files is Starlette's 400 "Too many files", a
file part sent without a file name arrives as text and reads "Expected UploadFile, received:
<class 'str'>". Read here, the number of files is bounded by ``max_documents_per_request``
(each file gives a document at least) and every refusal is an ``ApiError`` naming its field.
The API's description still shows the form (``UPLOAD_FORM``).
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from pydantic import PositiveInt, TypeAdapter, ValidationError
from python_multipart.exceptions import MultipartParseError
from python_multipart.multipart import DEFAULT_MAX_HEADER_SIZE
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException

from serve.http.errors import ApiError

#: The form's fields; any other is refused, naming it: a misspelt ``first_row`` was ignored, and the whole CSV file
#: sent again from its first row.
FIELDS = ("files", "spec", "first_page", "first_row", "replace")

#: The parts a form may have besides its files: its fields, each once, and room for a few more, which the check of
#: the fields' names then refuses by name (Starlette's own refusal of too many says "Too many fields" and no name).
MAX_FIELDS = 16

#: ``openapi_extra`` of the route: the multipart form it reads.
UPLOAD_FORM = {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": {
    "type": "object", "required": ["files"], "properties": {
        "files": {"type": "array", "items": {"type": "string", "format": "binary"},
                  "description": "PDF (.pdf), text (.txt), Markdown (.md, .markdown), HTML (.html, .htm) or "
                                 "CSV (.csv: a document a row, as `tessera ingest` reads it) files, each with its "
                                 "file name, at most max_upload_bytes in all and max_documents_per_request files."},
        "spec": {"type": "string", "description": "For a new index: the built-in ingest spec that makes it "
                                                  "(default `ingest`)."},
        "first_page": {"type": "integer", "minimum": 1,
                       "description": "With one PDF alone: the part of it from this page (1-based), at most "
                                      "max_documents_per_request pages; how a PDF of more pages than that is sent "
                                      "(a 422 too_many_pages gives its `pages`)."},
        "first_row": {"type": "integer", "minimum": 1,
                      "description": "With one CSV file alone: the part of it from this row with a text (1-based), "
                                     "at most max_documents_per_request rows; how a CSV of more rows than that is "
                                     "sent (a 422 too_many_rows gives its `rows`)."},
        "replace": {"type": "boolean", "default": False,
                    "description": "A file sent before replaces everything it gave then (a re-sent PDF's pages, "
                                   "however many it has now); false: its documents are a 409."}}}}}}}


async def read_upload(request: Request, max_files: int) -> tuple[list[tuple[str, bytes]], str | None, bool,
                                                                 int | None, int | None]:
    """The uploaded files (name, bytes), ``spec``, ``replace``, ``first_page`` and ``first_row`` of the request's
    multipart form."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "multipart/form-data":  # JSON read as an empty form: "send at least one file" did not say why
        raise ApiError(422, f"files: this route reads a multipart form of files (curl -F files=@notes.md), not "
                       f"{kind or 'a body without a Content-Type'}; documents as JSON go to "
                       f"{request.url.path.removesuffix('/files')}/documents", param="files", code="invalid_body")
    try:
        form = await request.form(max_files=max_files, max_fields=MAX_FIELDS)
    except HTTPException as err:  # Starlette's 400 for a form it stopped reading
        if err.status_code != 400:  # the body limit's 413 while the form streamed in: its own answer, naming it
            raise
        detail = str(err.detail)
        if detail.startswith("Too many files"):
            raise ApiError(422, f"files: more than {max_files} files, over the limit max_documents_per_request="
                           f"{max_files} (each file gives one document or more); send them in several requests",
                           param="files", code="max_documents_per_request") from None
        if _header_too_long(err):
            raise ApiError(422, f"files: a file name is too long: the form's header of a file, which holds its name, "
                           f"may have at most {DEFAULT_MAX_HEADER_SIZE} bytes (the form parser's limit); give the file "
                           "a shorter name", param="files", code="invalid_file") from None
        raise ApiError(400, f"files: the multipart form cannot be read: {detail}", param="files",
                       code="invalid_body") from None
    try:
        _refuse_unknown_fields(form)
        _refuse_repeated_fields(form)
        files = []
        for position, item in enumerate(form.getlist("files")):
            if not isinstance(item, UploadFile) or not item.filename:
                raise ApiError(422, f"files: part {position + 1} of `files` has no file name; send each file as a "
                               "file part with its name (curl -F files=@handbook.pdf)", param="files",
                               code="invalid_file")
            files.append((_file_name(item.filename), await item.read()))
        if not files and (named := [key for key, item in form.multi_items() if isinstance(item, UploadFile)]):
            raise ApiError(422, f"files: the form's file parts are named {', '.join(map(repr, dict.fromkeys(named)))}"
                           ", not `files`: name each file part `files` (curl -F files=@notes.md)", param="files",
                           code="invalid_value")
        return (files, _text(form.get("spec"), "spec"), _flag(form.get("replace")),
                _position(form.get("first_page"), "first_page", "page"), _position(form.get("first_row"), "first_row",
                                                                                  "row"))
    finally:
        await form.close()


def _header_too_long(err: HTTPException) -> bool:
    """Whether Starlette's 400 "Invalid multipart data." came of a part's header over python-multipart's limit
    (``DEFAULT_MAX_HEADER_SIZE``): a file name of thousands of characters, which Starlette's message leaves out."""
    from operators.errors import in_chain

    cause = in_chain(err, MultipartParseError)
    return cause is not None and "header size" in str(cause)


def _refuse_unknown_fields(form: Any) -> None:
    """A 422 naming the first of ``form``'s fields that the route does not read (with the close name, where a field
    is misspelt): ignored, a ``first_rows`` sent a whole CSV file, the part meant to skip rows of it left in. File
    parts under another name than ``files`` are left to the check that names them all. Worded as every unknown
    name is (``unknown_name_hint``)."""
    from operators.errors import unknown_name_hint

    for key, item in form.multi_items():
        if key in FIELDS or isinstance(item, UploadFile):
            continue
        raise ApiError(422, f"{key}: this form has no field '{key}'{unknown_name_hint(key, FIELDS, 'fields')}",
                       param=key, code="invalid_value")


def _refuse_repeated_fields(form: Any) -> None:
    """A 422 naming a field other than ``files`` that the form sends more than once, with its values: Starlette's
    form keeps each, and one was read without a word (``replace=true`` then ``replace=false``: false)."""
    from operators.errors import one_line

    for key in FIELDS[1:]:
        sent = form.getlist(key)
        if len(sent) > 1:
            said = ", ".join(one_line(item.filename if isinstance(item, UploadFile) else item, 40) for item in sent)
            raise ApiError(422, f"{key}: the form sends this field {len(sent)} times ({said}); send it once",
                           param=key, code="invalid_value")


def _file_name(sent: str) -> str:
    """A part's file name as the user's file has it: browsers, curl and requests write a file name's ``"``, line feed
    and carriage return as ``%22``, ``%0A`` and ``%0D`` in a form (the HTML standard's multipart encoding), which the
    form parser leaves as they are (a file ``a "draft".md`` was stored and shown as ``a %22draft%22.md``)."""
    return sent.replace("%22", '"').replace("%0A", "\n").replace("%0D", "\r")


def _text(value: Any, field: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise ApiError(422, f"{field}: a text field, not a file", param=field, code="invalid_value")
    return value


def _flag(value: Any) -> bool:
    """``replace`` as a form sends it: true/false, 1/0, yes/no, on/off (pydantic's reading of a bool)."""
    if value is None:
        return False
    try:
        return TypeAdapter(bool).validate_python(_text(value, "replace"))
    except ValidationError:
        raise ApiError(422, f"replace: '{value}' is not true or false", param="replace", code="invalid_value") from None


def _position(value: Any, field: str, what: str) -> int | None:
    """``first_page`` or ``first_row``: a ``what`` number, 1 or more."""
    if value is None:
        return None
    try:
        return TypeAdapter(PositiveInt).validate_python(_text(value, field))
    except ValidationError:
        raise ApiError(422, f"{field}: '{value}' is not a {what} number (1 or more)", param=field,
                       code="invalid_value") from None
