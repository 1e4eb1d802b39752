"""Records and tables to documents: the field mapping params every document source takes, and their use.

``DocumentParams`` holds the params every document source takes (which field is the id, the text, the title;
which other fields to keep; a limit; the batch size), and ``DocumentMapper`` applies them to rows (JSONL, SQL)
or to Arrow tables (Parquet, CSV), giving ``docno, title, text, <metadata>``.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable, Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from operators.errors import SourceError
from operators.ids import fill_missing_ids
from operators.unicode import BLANK_LOOKING
from operators.unicode import blank as unicode_blank

logger = logging.getLogger("operators.sources")

#: Output columns a source owns; input fields with these names are not kept as metadata.
RESERVED = ("docno", "title", "text")
#: Id fields tried, in order, when ``id_field`` is left at its BEIR default ``_id``.
ID_FALLBACKS = ("docno", "id", "doc_id")  # doc_id: what Tessera itself calls it
#: What a file without the text column is told to do; an ingestion that every such file failed reads it to add that a
#: retry, which reads the file with the same fields, fails the same way (``flows.ingestion.errors``).
TEXT_FIELD_ADVICE = "name the column that holds the text"


def default_id(record: dict) -> str | None:
    """A JSON record's id as a source reads it at the default ``id_field`` (``_id``, then ``ID_FALLBACKS``: the
    first that is not blank), as text; None when it has none. For readers of a corpus file beside ingestion (a
    benchmark's id checks, training's mining), so they find the documents by the ids the index holds."""
    for name in ("_id", *ID_FALLBACKS):
        value = record.get(name)
        if value is not None and str(value).strip():
            return str(value)
    return None


class DocumentParams(BaseModel):
    """Params shared by the document sources (each source's ``Params`` extends it)."""

    model_config = ConfigDict(extra="forbid")
    id_field: str = Field(
        "_id",
        min_length=1,
        description="Field holding the document id. At the default `_id`, `docno`, `id` then `doc_id` are tried "
        "when `_id` is absent; a record with no id gets a content id. An `id` field beside the one used is "
        "metadata; a `docno` or `doc_id` field beside it is left out, named in a warning.",
    )
    text_field: str = Field("text", min_length=1, description="Field holding the document text.")
    title_field: str = Field(
        "title", min_length=1, description="Field holding the title, emitted as `title` when present."
    )
    fields: list[str] | None = Field(
        None,
        description="Other fields to keep as columns. None keeps every other field (for JSONL: those of "
        "any record, null where a record lacks one); [] keeps none. Nested values become JSON strings.",
    )
    id_mode: Literal["field", "content"] = Field(
        "field",
        description="`field`: ids from `id_field`; `content`: md5 of title + first 100 characters of text "
        "(first 12 hex characters) for every document.",
    )
    limit: int | None = Field(
        None, gt=0, description="Read only the first N documents, in file order (the source is then one split)."
    )
    batch_rows: int = Field(10_000, gt=0, description="Most rows in one emitted table.")


def newlines(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """Texts with their line ends read as Python's universal newlines read a file's (``\\r\\n`` and ``\\r`` as
    ``\\n``), as ``file_text.read_text_file`` reads a text file: a CSV saved on Windows (a quoted cell of several
    lines) or a JSON export of a web form's CRLF text and its LF copy are one document with one content id, and no
    ``\\r`` reaches the index, a snippet or a model's context. Text without a ``\\r`` is left as it is."""
    return pc.replace_substring_regex(values, r"\r\n?", "\n")


def blank(value: Any) -> bool:
    """Whether a field's value is missing: None, or a string with nothing to read (whitespace, control and invisible
    characters only: ``unicode.blank``), as an empty id or text is."""
    return value is None or (isinstance(value, str) and unicode_blank(value))


def values_to_array(values: list[Any]) -> pa.Array:
    """An Arrow array of plain values; nested values, mixed types and integers beyond 64 bits (which no Arrow
    integer holds, and a double would round) become text (``text_values``), so no value is lost."""
    if any(isinstance(v, (dict, list)) for v in values):
        return text_values(values)
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        return text_values(values)


def text_values(values: list[Any]) -> pa.Array:
    """The values as text: a string as it is (``unknown``, which a filter on it matches, not ``"unknown"``), any
    other value its JSON text (``1999``, ``["x", 2]``), a null null."""
    return pa.array([v if v is None or isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
                     for v in values], pa.string())


class QuietNotes(dict):
    """The ``Source.held_notes`` of a read only to compare a source's first documents with the index's (a source
    found at another path: ``flows.ingestion.moved``): the warnings its records give are staging's to say, and a
    second CSV or Parquet source said "skipped N document(s) with an empty text" twice."""


class DocumentMapper:
    """Applies ``DocumentParams`` to records or tables, giving ``docno, title, text, <metadata>``."""

    def __init__(self, params: DocumentParams, *, op: Any):
        self.p = params
        self.op = op
        self.id_fields = [params.id_field] + (list(ID_FALLBACKS) if params.id_field == "_id" else [])
        self._left_out: set[str] = set()  # the binary columns named in a warning already

    def _keep(self, names: Iterable[str], used: set[str]) -> list[str]:
        if self.p.fields is not None:
            return [f for f in self.p.fields if f not in RESERVED]
        return [n for n in names if n not in used and n not in RESERVED]

    def _id_fields_read(self, record: dict) -> tuple[str, ...]:
        """The id fields a record's id was looked for in: those up to the one it was taken from (all when it has
        none, or ids are content ids); an id field after that one is a field of its own."""
        if self.p.id_mode == "field":
            for i, name in enumerate(self.id_fields):
                if not blank(record.get(name)):
                    return tuple(self.id_fields[:i + 1])
        return tuple(self.id_fields)

    def _other_ids(self, names: Iterable[str], used: set[str]) -> set[str]:
        """Of ``names``, the id fields no id was taken from (an ``id`` beside ``_id``): metadata, but for those
        that name the index's own columns (``docno`` here, ``doc_id`` by staging), which are named in a warning."""
        others = {n for n in names if n in self.id_fields and n not in used}
        if "docno" in others and self.p.fields is None and not getattr(self.op, "_warned_docno", False):
            self.op._warned_docno = True
            where = self._where()
            logger.warning("%s: field docno is left out: the documents' ids are their %s, and docno is the index's "
                           "name for a passage's id; rename the field to keep it", where, self.id_fields[0])
        return others

    def record_columns(self, *records: dict, where: str | None = None) -> tuple[bool, list[str]]:
        """Whether ``records`` (a file's first record, then a batch's) have a title, and their metadata fields:
        every field any of them has, in the order they first appear, so a field the file's first record lacks
        is not lost; an id field that a record's id was not taken from is one (``_other_ids``). ``where``: their
        file, which an error names (else the source's path, a folder's)."""
        names = dict.fromkeys(name for record in records for name in record)
        self.check_named_fields(names, where or self._where())
        reads = [self._id_fields_read(record) for record in records]
        others = self._other_ids([n for r, read in zip(records, reads) for n in r if n not in read], set())
        used = {self.p.text_field, self.p.title_field, *(set(self.id_fields) - others)}
        return self.p.title_field in names, self._keep(names, used)

    def check_named_fields(self, names: Iterable[str], where: str) -> None:
        """An id or title field named (not the defaults) that no document has is refused, as a missing text field
        is: the documents got content ids, or no title, without a word."""
        p, names = self.p, set(names)
        for option, field, default in (("id", p.id_field, "_id"), ("title", p.title_field, "title")):
            if field == default or field in names or option == "id" and p.id_mode == "content":
                continue
            raise SourceError(
                f"{where}: no {option} field '{field}' (fields: {sorted(names)}); name the one that holds the "
                f"{option}: tessera ingest --{option}-field NAME (in a spec, the read step's {option}_field), or "
                f"leave it out" + (" for content ids" if option == "id" else ""),
                op=self.op.name, step=self.op.step_id, field=f"params.{option}_field")

    def _where(self) -> str:
        params = getattr(self.op, "params", None)
        return str(getattr(params, "path", None) or getattr(params, "folder", None) or getattr(self.op, "name", "?"))

    def _skip_empty(self, n: int, where: str) -> None:
        """Count ``n`` documents left out for an empty text: logged, and in the step's usage (``empty_texts``); not in
        a read only to compare (``QuietNotes``), which staging reads again and says."""
        if isinstance(getattr(self.op, "held_notes", None), QuietNotes):
            return
        logger.warning("%s [%s]: skipped %d document(s) with an empty text in %s", getattr(self.op, "name", "?"),
                       getattr(self.op, "step_id", "?"), n, where)
        if hasattr(self.op, "record_usage"):
            self.op.record_usage(empty_texts=n)

    def from_records(self, records: list[dict], *, has_title: bool, extras: list[str]) -> pa.Table:
        """Documents of JSON records, a row per record (the caller leaves out records with an empty text:
        ``record_problem``); an empty id ("", whitespace) is a missing one: the document gets a content id."""
        p = self.p
        texts = newlines(pa.array([_as_text(r.get(p.text_field)) for r in records], pa.string()))
        titles = newlines(pa.array([_as_text(r.get(p.title_field)) for r in records], pa.string())) if has_title \
            else None
        ids = None
        if p.id_mode == "field":
            ids = [next((r[f] for f in self.id_fields if not blank(r.get(f))), None) for r in records]
            ids = pa.array([_as_text(i) for i in ids], pa.string())
        columns: dict[str, Any] = {"docno": fill_missing_ids(ids, titles, texts)}
        columns["title"] = pc.fill_null(titles if titles is not None else pa.nulls(len(records), pa.string()),
                                        "")  # always, "" without one: see ``from_table``
        columns["text"] = pc.fill_null(texts, "")
        read = [self._id_fields_read(r) for r in records] if self.p.fields is None else None
        for name in extras:
            if read is not None and name in self.id_fields:  # where it was read for the id, it is no metadata
                columns[name] = values_to_array([None if name in f else r.get(name) for r, f in zip(records, read)])
            else:
                columns[name] = values_to_array([r.get(name) for r in records])
        return pa.table(columns)

    def _text_columns(self, table: pa.Table, id_name: str | None, has_title: bool, where: str):
        """The rows with a text or title, and their texts, titles (None without) and ids (None without) as text."""
        p = self.p
        empty = _blank(table.column(p.text_field))  # and no title: a title alone is a document
        if has_title:
            empty = pc.and_(empty, _blank(table.column(p.title_field)))
        if n := pc.sum(empty).as_py():
            self._skip_empty(n, where)
            table = table.filter(pc.invert(empty))
        texts = newlines(pc.fill_null(column_as_text(table.column(p.text_field)), ""))
        titles = newlines(pc.fill_null(column_as_text(table.column(p.title_field)), "")) if has_title else None
        ids = column_as_text(table.column(id_name)) if id_name else None
        return table, texts, titles, ids

    def from_table(self, table: pa.Table, *, where: str, carry: tuple[str, ...] = ()) -> pa.Table:
        """Documents of a table, a row per row that has a text or title. ``carry``: columns kept as they are, last,
        aligned with the rows kept (a CSV row's line)."""
        p = self.p
        names = [n for n in table.column_names if n not in carry]
        if p.text_field not in names:
            raise SourceError(
                f"{where}: no text column '{p.text_field}' (columns: {', '.join(map(repr, names))}); "
                f"{TEXT_FIELD_ADVICE}: tessera ingest --text-field COLUMN "
                "(in Python, ingest(..., fields={'text_field': COLUMN}); in "
                f"a spec, the read step's param: {{op: {self.op.name}, params: {{..., text_field: COLUMN}}}})",
                op=self.op.name, step=self.op.step_id, field="params.text_field",
            )
        self.check_named_fields(names, where)
        id_name = next((f for f in self.id_fields if f in names), None) if p.id_mode == "field" else None
        has_title = p.title_field in names
        try:
            table, texts, titles, ids = self._text_columns(table, id_name, has_title, where)
        except UnicodeDecodeError as err:  # a binary column (Parquet) of bytes that are no UTF-8
            raise SourceError(f"{where}: a binary column holds bytes that are not UTF-8 text ({err.reason} at byte "
                              f"{err.start} of a value): write it as a string column, or as UTF-8",
                              op=self.op.name, step=self.op.step_id) from None
        ids = None if ids is None else pc.if_else(_blank(ids), pa.scalar(None, pa.string()), ids)  # "" is no id
        columns: dict[str, Any] = {"docno": fill_missing_ids(ids, titles, texts)}
        # A title column always, "" where there is none: a batch or file without titles beside one with them gave
        # two schemas, which a flow merged into a null title (``hit["title"][:20]`` failed) after every metadata column.
        columns["title"] = titles if titles is not None else pa.array([""] * len(texts), pa.string())
        columns["text"] = texts
        read = self.id_fields[:self.id_fields.index(id_name) + 1] if id_name else self.id_fields
        used = {p.text_field, p.title_field, *read}
        self._other_ids(names, used)
        for name in self._keep(names, used):
            if name not in names:
                columns[name] = pa.nulls(table.num_rows, pa.string())
            elif (kept := self._metadata(name, table.column(name), where)) is not None:
                columns[name] = kept
        for name in carry:
            columns[name] = table.column(name)
        return pa.table(columns)


    def _metadata(self, name: str, column: pa.ChunkedArray, where: str) -> pa.ChunkedArray | None:
        """A metadata column as the index keeps it. Bytes (Parquet's binary, a database's BLOB) that are UTF-8 are
        text written as bytes: kept as text (``en``, not ``b'en'``). Other bytes (an image, a digest) are no
        metadata that results, filters or JSON can show: left out, named in a warning, or refused where ``fields``
        asked for the column."""
        if not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)
                or pa.types.is_fixed_size_binary(column.type)):
            return column
        try:
            return column.cast(pa.string())  # Arrow checks that the bytes are UTF-8
        except pa.ArrowInvalid:
            pass
        why = f"{where}: column '{name}' holds bytes that are not UTF-8 text"
        if self.p.fields is not None:
            raise SourceError(f"{why}; metadata is text, numbers, dates or lists: leave it out of fields",
                              op=self.op.name, step=self.op.step_id, field="params.fields")
        if name not in self._left_out:
            self._left_out.add(name)
            logger.warning("%s (an image, a digest?): left out of the documents' metadata", why)
        return None


#: ``unicode.blank`` as an RE2 pattern, for a whole column at once.
BLANK_PATTERN = (r"^[\s\p{Z}\p{Cc}\p{Cf}\p{Mn}\p{Me}"
                 + "".join(f"\\x{{{ord(c):04x}}}" for c in sorted(BLANK_LOOKING)) + "]*$")


def _blank(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """True where a column's value is null or, as a string, holds nothing to read (``blank``)."""
    return pc.fill_null(pc.match_substring_regex(column_as_text(column), BLANK_PATTERN), True)


def column_as_text(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A column as text: Arrow's cast where there is one (numbers, dates), else each value's JSON text (a list, a
    struct: Parquet), as a JSONL record's value is (``_as_text``)."""
    try:
        return column.cast(pa.string())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return pa.array([_as_text(v) for v in column.to_pylist()], pa.string())


class JsonNumber(float):
    """A JSON number with a fraction or exponent, as the float it is and the text it was written as: an id or a text
    field holding one is that text (``1e2``, ``1.10``), where Python's float wrote ``100.0`` and ``1.1`` (so ``1.10``
    and ``1.1``, or ``1E400`` and ``2E400``, both ``Infinity``, were one id). ``json.loads``' ``parse_float``."""

    __slots__ = ("text",)

    def __new__(cls, text: str) -> "JsonNumber":
        number = super().__new__(cls, text)
        number.text = text
        return number

    def __reduce__(self):  # pickled (to a Ray worker) with its text
        return (JsonNumber, (self.text,))


def _as_text(value: Any) -> str | None:
    """A text, title or id as text: a string as it is, a JSON value (a number, true/false, an object, a list) its
    JSON text, as Arrow writes a Parquet column of them (``true``, not Python's ``True``); any other value (a
    database's date) its ``str``."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):  # a Parquet string column written as binary: its text, not "b'...'"
        return bytes(value).decode("utf-8")  # (bytes that are not UTF-8: a UnicodeDecodeError, named by from_table)
    if isinstance(value, JsonNumber):
        return value.text
    if isinstance(value, (bool, int, float, dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)
