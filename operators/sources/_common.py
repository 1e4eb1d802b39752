"""What the document sources share: field mapping params, paths, byte ranges, JSONL records.

A source turns records into a documents table ``docno, title?, text, <metadata>``.
``DocumentParams`` holds the params every document source takes (which field is the
id, the text, the title; which other fields to keep; a limit; the batch size), and
``DocumentMapper`` applies them to rows (JSONL, SQL) or to Arrow tables (Parquet,
CSV). Splits are ``FileRange``s: a whole file, or a byte range of one whose lines
are owned by the range their first byte falls in, so every line is read once.
"""

from __future__ import annotations

import gzip
import itertools
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field

from operators.errors import SourceError
from operators.ids import fill_missing_ids
from operators.sources.paths import is_gzip

logger = logging.getLogger("operators.sources")

#: Output columns a source owns; input fields with these names are not kept as metadata.
RESERVED = ("docno", "title", "text")
#: Id fields tried, in order, when ``id_field`` is left at its BEIR default ``_id``.
ID_FALLBACKS = ("docno", "id", "doc_id")  # doc_id: what Tessera itself calls it


class DocumentParams(BaseModel):
    """Params shared by the document sources (each source's ``Params`` extends it)."""

    model_config = ConfigDict(extra="forbid")
    id_field: str = Field(
        "_id",
        min_length=1,
        description="Field holding the document id. At the default `_id`, `docno`, `id` then `doc_id` are tried "
        "when `_id` is absent; a record with no id gets a content id.",
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


@dataclass(frozen=True)
class FileRange:
    """Lines of ``path`` whose first byte lies in ``[start, end)``; ``end=None`` is the end of file."""

    path: str
    start: int = 0
    end: int | None = None


def file_ranges(paths: list[Path], num_splits: int) -> list[FileRange]:
    """Each file one range at least; with ``num_splits`` above the file count, big files are cut by bytes.

    Pieces are spread over the files by size. Gzipped files cannot be cut.
    """
    sizes = [p.stat().st_size for p in paths]
    total = sum(sizes) or 1
    ranges: list[FileRange] = []
    for path, size in zip(paths, sizes):
        pieces = 1 if is_gzip(path) or size == 0 else max(1, round(num_splits * size / total))
        bounds = [size * i // pieces for i in range(pieces + 1)]
        for start, end in zip(bounds, bounds[1:]):
            if end > start or pieces == 1:
                ranges.append(FileRange(str(path), start, None if end == size else end))
    return ranges


def iter_lines(rng: FileRange) -> Iterator[tuple[int, int, bytes]]:
    """``(byte_offset, line_index_in_range, line)`` for the lines the range owns."""
    if is_gzip(rng.path):
        with gzip.open(rng.path, "rb") as f:
            for index, line in enumerate(f):
                yield -1, index, line
        return
    with open(rng.path, "rb") as f:
        pos = rng.start
        if pos > 0:
            f.seek(pos - 1)
            if f.read(1) != b"\n":  # this line began in the previous range
                pos += len(f.readline())
        index = 0
        while rng.end is None or pos < rng.end:
            line = f.readline()
            if not line:
                break
            yield pos, index, line
            pos += len(line)
            index += 1


#: Why a JSONL file whose first line opens a JSON array is not read (a ``.json`` file of documents given as JSONL).
JSON_ARRAY = ("the file holds a JSON array: JSONL holds one object per line (write it so, e.g. "
              "jq -c '.[]' FILE.json > FILE.jsonl)")


def opens_array(raw: bytes) -> bool:
    """Whether a file's first non-blank line opens a JSON array (``[`` then an object, or the array's end)."""
    return raw.lstrip().startswith(b"[") and raw.lstrip()[1:].lstrip()[:1] in (b"{", b"", b"]")


#: How a flow's source step skips bad records instead (a command with an option of its own says that instead).
SKIP_HINT = " (on_error='skip' skips such lines)"


class RecordErrors:
    """Bad records of one range: raise at once (``on_error="raise"``) or count them and log at the end."""

    def __init__(self, rng: FileRange, on_error: str, *, op: Any):
        self.rng, self.on_error, self.op = rng, on_error, op
        self._counted = (0, 0)  # (byte offset, newlines before it), to count on from
        self.skipped: list[int] = []

    def line_number(self, offset: int, index: int) -> int:
        """1-based line number in the file of the line at ``offset`` (``index`` within the range)."""
        if self.rng.start == 0 or offset < 0:
            return index + 1
        done, count = self._counted
        if offset < done:
            done, count = 0, 0
        with open(self.rng.path, "rb") as f:
            f.seek(done)
            left = offset - done
            while left > 0:
                block = f.read(min(left, 1 << 20))
                if not block:
                    break
                count += block.count(b"\n")
                left -= len(block)
        self._counted = (offset, count)
        return count + 1

    def bad(self, offset: int, index: int, reason: str) -> None:
        line = self.line_number(offset, index)
        if self.on_error == "raise":
            raise SourceError(
                f"{self.rng.path}, line {line}: {reason}{SKIP_HINT}",
                op=self.op.name, step=self.op.step_id,
            )
        self.skipped.append(line)

    def report(self) -> None:
        if self.skipped:
            shown = ", ".join(map(str, self.skipped[:10])) + (", ..." if len(self.skipped) > 10 else "")
            logger.warning(
                "%s [%s]: skipped %d unreadable line(s) in %s (lines %s)",
                self.op.name, self.op.step_id, len(self.skipped), self.rng.path, shown,
            )


def iter_jsonl(rng: FileRange, *, on_error: str, op: Any, required: str | None = None,
               title_field: str = "title") -> Iterator[dict]:
    """JSON objects of the range's lines; blank lines are not records, bad ones go to ``RecordErrors``.

    ``required`` names a field every record must have (the text field).
    """
    errors = RecordErrors(rng, on_error, op=op)
    try:
        for offset, index, raw in iter_lines(rng):
            if offset in (0, -1) and index == 0 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                first = offset in (0, -1) and index == 0
                errors.bad(offset, index, JSON_ARRAY if first and opens_array(raw) else f"not valid JSON ({err})")
                continue
            if not isinstance(record, dict):
                first = offset in (0, -1) and index == 0 and isinstance(record, list)
                errors.bad(offset, index, JSON_ARRAY if first else f"a JSON {type(record).__name__}, not an object")
                continue
            if required is not None and (problem := record_problem(record, required, title_field)) is not None:
                errors.bad(offset, index, problem)
                continue
            yield record
    finally:
        errors.report()


def blank(value: Any) -> bool:
    """Whether a field's value is missing: None, or a string of whitespace only (an empty id or text)."""
    return value is None or (isinstance(value, str) and not value.strip())


def record_problem(record: dict, text_field: str, title_field: str = "title") -> str | None:
    """Why a JSON object is not a document (no text field, or neither a text nor a title: a title alone is a
    document, as in TREC-COVID's corpus), or None."""
    if text_field not in record:
        return f"no field '{text_field}' (fields: {sorted(record)})"
    if blank(record[text_field]) and blank(record.get(title_field)):
        return (f"empty text (field '{text_field}' is {'null' if record[text_field] is None else 'empty or blank'}, "
                "and there is no title)")
    return None


def read_jsonl_documents(
    op: Any, ranges: list[FileRange], params: DocumentParams, *, on_error: str
) -> Iterator[pa.Table]:
    """Document tables of at most ``params.batch_rows`` rows from JSONL ranges, read in order."""
    mapper = DocumentMapper(params, op=op)
    left = params.limit
    for rng in ranges:
        first = first_record(rng.path)
        records = iter_jsonl(rng, on_error=on_error, op=op, required=params.text_field, title_field=params.title_field)
        try:
            wanted = records if left is None else itertools.islice(records, left)
            for batch in batched(wanted, params.batch_rows):
                if left is not None:
                    left -= len(batch)
                has_title, extras = mapper.record_columns(first, *batch)
                yield mapper.from_records(batch, has_title=has_title, extras=extras)
        finally:
            records.close()
        if left is not None and left <= 0:
            return


def first_record(path: str) -> dict:
    """The first JSON object of a JSONL file (``{}`` if there is none): its fields fix the file's columns."""
    opener = gzip.open if is_gzip(path) else open
    with opener(path, "rb") as f:
        for raw in f:
            try:
                record = json.loads(raw.removeprefix(b"\xef\xbb\xbf"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue
            if isinstance(record, dict):
                return record
    return {}


def batched(items: Iterable[Any], n: int) -> Iterator[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == n:
            yield batch
            batch = []
    if batch:
        yield batch


def rebatch(tables: Iterable[pa.Table], n: int, limit: int | None = None) -> Iterator[pa.Table]:
    """Slices of at most ``n`` rows, stopping after ``limit`` rows in all."""
    left = limit
    for table in tables:
        for start in range(0, table.num_rows, n):
            piece = table.slice(start, n if left is None else min(n, left))
            if piece.num_rows:
                yield piece
            if left is not None:
                left -= piece.num_rows
                if left <= 0:
                    return


# -- records and tables to documents -------------------------------------------


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


class DocumentMapper:
    """Applies ``DocumentParams`` to records or tables, giving ``docno, title?, text, <metadata>``."""

    def __init__(self, params: DocumentParams, *, op: Any):
        self.p = params
        self.op = op
        self.id_fields = [params.id_field] + (list(ID_FALLBACKS) if params.id_field == "_id" else [])

    def _keep(self, names: Iterable[str], used: set[str]) -> list[str]:
        if self.p.fields is not None:
            return [f for f in self.p.fields if f not in RESERVED]
        return [n for n in names if n not in used and n not in RESERVED]

    def record_columns(self, *records: dict) -> tuple[bool, list[str]]:
        """Whether ``records`` (a file's first record, then a batch's) have a title, and their metadata fields:
        every field any of them has, in the order they first appear, so a field the file's first record lacks
        is not lost."""
        used = {self.p.text_field, self.p.title_field, *self.id_fields}
        names = dict.fromkeys(name for record in records for name in record)
        return self.p.title_field in names, self._keep(names, used)

    def _skip_empty(self, n: int, where: str) -> None:
        """Count ``n`` documents left out for an empty text: logged, and in the step's usage (``empty_texts``)."""
        logger.warning("%s [%s]: skipped %d document(s) with an empty text in %s", getattr(self.op, "name", "?"),
                       getattr(self.op, "step_id", "?"), n, where)
        if hasattr(self.op, "record_usage"):
            self.op.record_usage(empty_texts=n)

    def from_records(self, records: list[dict], *, has_title: bool, extras: list[str]) -> pa.Table:
        """Documents of JSON records, a row per record (the caller leaves out records with an empty text:
        ``record_problem``); an empty id ("", whitespace) is a missing one: the document gets a content id."""
        p = self.p
        texts = [_as_text(r.get(p.text_field)) for r in records]
        titles = [_as_text(r.get(p.title_field)) for r in records] if has_title else None
        ids = None
        if p.id_mode == "field":
            ids = [next((r[f] for f in self.id_fields if not blank(r.get(f))), None) for r in records]
            ids = pa.array([None if i is None else str(i) for i in ids], pa.string())
        columns: dict[str, Any] = {"docno": fill_missing_ids(ids, titles, texts)}
        if titles is not None:
            columns["title"] = pc.fill_null(pa.array(titles, pa.string()), "")
        columns["text"] = pc.fill_null(pa.array(texts, pa.string()), "")
        for name in extras:
            columns[name] = values_to_array([r.get(name) for r in records])
        return pa.table(columns)

    def from_table(self, table: pa.Table, *, where: str) -> pa.Table:
        p = self.p
        names = table.column_names
        if p.text_field not in names:
            raise SourceError(
                f"{where}: no text column '{p.text_field}' (columns: {names}); set text_field",
                op=self.op.name, step=self.op.step_id, field="params.text_field",
            )
        id_name = next((f for f in self.id_fields if f in names), None) if p.id_mode == "field" else None
        has_title = p.title_field in names
        empty = _blank(table.column(p.text_field))  # and no title: a title alone is a document
        if has_title:
            empty = pc.and_(empty, _blank(table.column(p.title_field)))
        if n := pc.sum(empty).as_py():
            self._skip_empty(n, where)
            table = table.filter(pc.invert(empty))
        texts = pc.fill_null(column_as_text(table.column(p.text_field)), "")
        titles = pc.fill_null(column_as_text(table.column(p.title_field)), "") if has_title else None
        ids = column_as_text(table.column(id_name)) if id_name else None
        ids = None if ids is None else pc.if_else(_blank(ids), pa.scalar(None, pa.string()), ids)  # "" is no id
        columns: dict[str, Any] = {"docno": fill_missing_ids(ids, titles, texts)}
        if titles is not None:
            columns["title"] = titles
        columns["text"] = texts
        used = {p.text_field, p.title_field, *self.id_fields}
        for name in self._keep(names, used):
            columns[name] = table.column(name) if name in names else pa.nulls(table.num_rows, pa.string())
        return pa.table(columns)


def _blank(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """True where a column's value is null or whitespace only (as a string)."""
    return pc.fill_null(pc.equal(pc.utf8_trim_whitespace(column_as_text(column)), ""), True)


def column_as_text(column: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    """A column as text: Arrow's cast where there is one (numbers, dates), else each value's JSON text (a list, a
    struct: Parquet), as a JSONL record's value is (``_as_text``)."""
    try:
        return column.cast(pa.string())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return pa.array([_as_text(v) for v in column.to_pylist()], pa.string())


def _as_text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str) if isinstance(value, (dict, list)) else str(value)
