"""What the document sources share: paths, byte ranges, JSONL records (and, from ``_documents``, the field
mapping params and their use).

A source turns records into a documents table ``docno, title, text, <metadata>`` (``_documents``). Splits are
``FileRange``s: a whole file, or a byte range of one whose lines are owned by the range their first byte falls
in, so every line is read once.
"""

from __future__ import annotations

import codecs
import gzip
import itertools
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple

import pyarrow as pa

from operators.errors import SourceError
from operators.sources._documents import (  # noqa: F401 - the sources import them from here
    ID_FALLBACKS,
    RESERVED,
    DocumentMapper,
    DocumentParams,
    JsonNumber,
    blank,
    default_id,
    column_as_text,
    text_values,
    values_to_array,
)
from operators.sources.encoding import NotLineText, line_decoder, line_reader_refuses, undecodable
from operators.sources.paths import is_gzip, warn_no_records
from operators.unicode import first_broken_text

logger = logging.getLogger("operators.sources")

#: UTF-8's byte-order mark, dropped where it opens a JSONL line.
BOM = codecs.BOM_UTF8


class Located(NamedTuple):
    """Documents of one file, with where each one's record is in that file in their last column (a CSV row's first
    line, a Parquet row's number): ingestion names a repeated id by its file and place."""

    path: str
    table: pa.Table


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


#: Why a JSONL file whose first line is ``{`` alone is not read: its objects are pretty-printed over several lines
#: (``json.dumps(indent=2)``, ``jq``'s default), and each of its lines was a failure that did not say so.
JSON_SPREAD = ("the file holds JSON objects written over several lines (pretty-printed): JSONL holds one object per "
               "line (write it so, e.g. jq -c . FILE > NEW_FILE.jsonl)")


def opens_spread_object(raw: bytes) -> bool:
    """Whether a file's first non-blank line is ``{`` alone: an object that goes on over the next lines."""
    return raw.strip() == b"{"


def json_line_problem(err: json.JSONDecodeError) -> str:
    """Why a JSONL line is not JSON, at its column: json's words ('line 1 column 32 (char 31)') read as another line
    of the file beside the line that names it (``many.jsonl, line 250001: ... line 1 column 32``)."""
    return f"not valid JSON at column {err.colno} ({err.msg.removesuffix(' at')})"


def whole_file_problem(raw: bytes) -> str | None:
    """Why a JSONL file whose first non-blank line is ``raw`` is not one object a line (``JSON_ARRAY``,
    ``JSON_SPREAD``), or None."""
    return JSON_ARRAY if opens_array(raw) else JSON_SPREAD if opens_spread_object(raw) else None


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
               title_field: str = "title", encoding: str | None = None) -> Iterator[dict]:
    """JSON objects of the range's lines; blank lines are not records, bad ones go to ``RecordErrors``.

    ``required`` names a field every record must have (the text field); ``encoding``: the file's (None: UTF-8, or
    a guess for a file that is not, ``encoding.FileDecoder``).
    """
    errors = RecordErrors(rng, on_error, op=op)
    decode = line_decoder(rng.path, encoding, op)
    try:
        for offset, index, raw in iter_lines(rng):
            # A UTF-8 byte-order mark opening any line, not the file's alone: JSON text never starts with one, and
            # JSONL files that each began with one, joined (`cat a.jsonl b.jsonl`), have it at lines inside too.
            raw = raw.removeprefix(BOM)
            if not raw.strip():
                continue
            try:
                record = json.loads(decode(raw), parse_float=JsonNumber)
            except UnicodeDecodeError as err:
                errors.bad(offset, index, undecodable(err, encoding))
                continue
            except json.JSONDecodeError as err:
                first = offset in (0, -1) and index == 0
                errors.bad(offset, index, (first and whole_file_problem(raw)) or json_line_problem(err))
                continue
            if not isinstance(record, dict):
                first = offset in (0, -1) and index == 0 and isinstance(record, list)
                errors.bad(offset, index, JSON_ARRAY if first else f"a JSON {type(record).__name__}, not an object")
                continue
            if required is not None and (problem := record_problem(record, required, title_field, raw)) is not None:
                errors.bad(offset, index, problem)
                continue
            yield record
    finally:
        errors.report()



def record_problem(record: dict, text_field: str, title_field: str, raw: bytes) -> str | None:
    """Why a JSON object is not a document (no text field, or neither a text nor a title: a title alone is a
    document, as in TREC-COVID's corpus; or a string JSON holds and UTF-8 cannot, a lone surrogate, which would
    fail the whole batch's table), or None. ``raw``: the line it was read from, whose escapes say whether a
    surrogate can be in it at all (the walk over the record is only made then)."""
    if text_field not in record:  # a misnamed text field ('body') would make a document of its title alone
        alone = (f"; a title alone is a document when its '{text_field}' is empty: add \"{text_field}\": \"\""
                 if not blank(record.get(title_field)) else "")
        return f"no field '{text_field}' (fields: {sorted(record)}){alone}"
    if blank(record[text_field]) and blank(record.get(title_field)):
        return (f"empty text (field '{text_field}' is {'null' if record[text_field] is None else 'empty or blank'}, "
                "and there is no title)")
    if (b"\\ud" in raw or b"\\uD" in raw) and (broken := first_broken_text(record)) is not None:
        return f"field '{broken[0]}' {broken[1]}"
    return None


def read_jsonl_documents(
    op: Any, ranges: list[FileRange], params: DocumentParams, *, on_error: str
) -> Iterator[pa.Table]:
    """Document tables of at most ``params.batch_rows`` rows from JSONL ranges, read in order."""
    mapper = DocumentMapper(params, op=op)
    left = params.limit
    encoding = getattr(params, "encoding", None)
    for rng in ranges:
        first = first_record(rng.path, encoding, op)
        if not first and rng.start == 0 and rng.end is None and _blank(rng.path):  # (a range of a big file: not it)
            warn_no_records(op, rng.path)  # among other files: said, as for CSV; the whole source: the caller's
            continue
        records = iter_jsonl(rng, on_error=on_error, op=op, required=params.text_field, title_field=params.title_field,
                             encoding=encoding)
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


def _blank(path: str) -> bool:
    """Whether ``path`` holds whitespace alone (an empty file, blank lines): read up to its first other byte."""
    with (gzip.open if is_gzip(path) else open)(path, "rb") as f:
        return all(not raw.strip() for raw in f)


def first_record(path: str, encoding: str | None = None, op: Any = None) -> dict:
    """The first JSON object of a JSONL file (``{}`` if there is none): its fields fix the file's columns. A file
    in UTF-16 or UTF-32 (given no encoding) is a ``NotLineText``: each of its lines would be a failure."""
    opener = gzip.open if is_gzip(path) else open
    decode = line_decoder(path, encoding, op)
    with opener(path, "rb") as f:
        if encoding is None and (why := line_reader_refuses(f.read(1024))) is not None:
            raise NotLineText(path, why, op=getattr(op, "name", None), step=getattr(op, "step_id", None))
        f.seek(0)
        for raw in f:
            try:
                record = json.loads(decode(raw.removeprefix(BOM)), parse_float=JsonNumber)
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
