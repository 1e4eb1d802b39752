"""CSV records with their line numbers, so a bad row is named and the rest of its file is still read.

pyarrow's CSV reader is fast but stops a file at its first bad row, and its error names no line (a
quote never closed even swallows the rows after it without a word). So the standard library's
``csv`` reader, strict, cuts the file into records, each with its first line: a record with a quote
that is never closed (or closed before text that is not a delimiter), a wrong number of fields or
bytes that are not UTF-8 is a ``BadRow``, and reading goes on after it (after a quoting error, on
the line after the record's first, since a stray quote swallows the lines after it). The
good records' own bytes are then parsed by pyarrow, the header before them, so values and types
are what pyarrow makes of the file; a later batch is converted to the column types of the first
(as pyarrow's streaming reader does), and a row whose value does not fit its column is a bad row.
"""

from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any, Collection, Iterator

import pyarrow as pa
import pyarrow.csv as pcsv

from operators.sources.encoding import file_head, line_decoder, line_reader_refuses, shown
from operators.sources.paths import is_gzip

#: Bytes of good records parsed by pyarrow at once (its streaming reader's block size).
FLUSH_BYTES = 1 << 22
#: I/O errors that end a file early: a gzip cut short or corrupt, a disk error.
READ_ERRORS = (OSError, EOFError, zlib.error)

csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))  # a document's text may be long; pyarrow has no limit


#: The column of a parsed table that holds each record's first line (1-based).
LINE = "__line"


@dataclass(frozen=True)
class BadRow:
    """A record of ``path`` that is not a document: its first line (None: the whole file), its bytes, why;
    ``broken``: the file cannot be read from this line on."""

    path: str
    line: int | None
    raw: bytes
    reason: str
    broken: bool = False

    def message(self) -> str:
        return f"{self.path}{'' if self.line is None else f', line {self.line}'}: {self.reason}"


#: Said with a quote that breaks a row: many TSV files (and some CSV) hold quotes as text, never quoting a field.
QUOTES_AS_TEXT = ("; if the file's quotes are text, not quoting (as in many TSV files), read it with quote_char: null "
                  "(a spec's read step, given as --spec)")


#: Why a file whose lines end with a carriage return alone cannot be read: its header row was "not valid CSV
#: (new-line character seen in unquoted field ...)", with advice on quotes that did not apply.
CR_LINES = ("its lines end with a carriage return alone (as classic Mac OS wrote them: Excel's 'CSV (Macintosh)'), "
            "and CSV is read line by line: convert them to newlines (tr '\\r' '\\n' < FILE > NEW_FILE) and ingest "
            "that")


@dataclass(frozen=True)
class CsvFormat:
    """How a file is parsed: delimiter, quote character, and the columns read as text whatever they hold."""

    delimiter: str = ","
    quote_char: str | None = '"'  # None: no quoting, a quote is text
    text_columns: tuple[str, ...] = ()
    encoding: str | None = None  # None: UTF-8, or a guess for a file that is not (``encoding.FileDecoder``)
    text_field: str | None = None  # the text column: a header of one column that names it split otherwise is refused


@dataclass
class _Record:
    line: int          # its first line, 1-based
    raw: bytes
    fields: list[str] | None
    problem: str | None = None
    broken: bool = False  # the file cannot be read from this line on (``problem`` says why)


def _records(path: str, fmt: CsvFormat, op: Any) -> Iterator[_Record]:
    """The file's records in order (the header first), a bad one with its problem; an I/O error ends the file
    with a record of no fields that says so. ``op``: the source reading it, which keeps the decoder's guess."""
    opener = gzip.open if is_gzip(path) else open
    decode = line_decoder(path, fmt.encoding, op)
    with opener(path, "rb") as f:
        source = iter(f)
        pending: deque[tuple[int, bytes]] = deque()  # lines to read again: those after an unclosed quote
        taken: list[tuple[int, bytes, str | None]] = []  # the current record's lines, with their UTF-8 problem
        count = 0

        def lines() -> Iterator[str]:
            nonlocal count
            while True:
                if pending:
                    number, raw = pending.popleft()
                else:
                    raw = next(source, None)
                    if raw is None:
                        return
                    count += 1
                    number = count
                    if number == 1:
                        raw = raw.removeprefix(b"\xef\xbb\xbf")
                try:
                    text, problem = decode(raw), None
                    if not raw.isascii():  # pyarrow parses the record's bytes: UTF-8 ones, whatever the file's
                        raw = text.encode("utf-8")
                except UnicodeDecodeError as err:
                    text = raw.decode("utf-8", "surrogateescape")
                    guess = "; no other encoding could be guessed" if decode.encoding is None else ""
                    problem = (f"not valid {shown(fmt.encoding)} (byte 0x{raw[err.start]:02x} at byte "
                               f"{err.start + 1} of line {number}{guess}); give the file's encoding (the encoding "
                               "param, tessera ingest --encoding)")
                taken.append((number, raw, problem))
                yield text

        def record(fields: list[str] | None, problem: str | None) -> _Record:
            got = list(taken)
            taken.clear()
            bad = problem or next((p for _, _, p in got if p), None)
            return _Record(got[0][0], b"".join(raw for _, raw, _ in got), fields, bad)

        while True:
            reader = csv.reader(lines(), delimiter=fmt.delimiter, quotechar=fmt.quote_char, strict=True,
                                quoting=csv.QUOTE_NONE if fmt.quote_char is None else csv.QUOTE_MINIMAL)
            try:
                for fields in reader:
                    yield record(fields, None)
                return
            except csv.Error as err:
                if not taken:  # nothing read that could be the bad record: do not loop on it
                    yield _Record(count + 1, b"", None, f"not valid CSV ({err})", broken=True)
                    return
                # the bad record is its first line: a stray quote swallows the lines after it, read them again
                first, rest = taken[0], taken[1:]
                taken[:] = [first]
                pending.extendleft((number, raw) for number, raw, _ in reversed(rest))
                if str(err) == "unexpected end of data":
                    yield record(None, f"a quote opened on line {first[0]} is never closed (the file ends inside it)"
                                 + QUOTES_AS_TEXT)
                elif rest:
                    yield record(None, f"not valid CSV ({err}, in a field quoted from line {first[0]} to line "
                                 f"{rest[-1][0]}); the lines after line {first[0]} are read again{QUOTES_AS_TEXT}")
                else:
                    yield record(None, f"not valid CSV ({err}){QUOTES_AS_TEXT}")
            except READ_ERRORS as err:
                line = taken[0][0] if taken else count + 1
                taken.clear()
                yield _Record(line, b"", None, f"{type(err).__name__}: {err}", broken=True)
                return


def iter_rows(path: str, fmt: CsvFormat, *, batch_rows: int, skip: frozenset[int] = frozenset(),
              only: Collection[int] | None = None, op: Any = None) -> Iterator[pa.Table | BadRow]:
    """The file's good records as pyarrow tables of at most ``batch_rows`` rows (with a ``__line`` column: each
    record's first line) and its bad ones as ``BadRow``s, in file order. A file that cannot be opened, or has no
    readable header, is one ``BadRow`` of no line. ``skip``: lines whose records are bad rows whatever they hold
    (recorded as such by a finished shard). ``only``: read just the records that begin on these lines, each on its
    own (its values' types inferred from it alone). ``op``: the source reading it, which then guesses a file's
    encoding once and keeps how it read it (``encoding.read_as``)."""
    parser = _Parser(fmt, fix_types=only is None)
    try:
        head = file_head(path)
        if fmt.encoding is None and (why := line_reader_refuses(head[:1024])) is not None:
            yield BadRow(path, None, b"", why)  # every line would be a bad row, and the header a column of NULs
            return
        if b"\r" in head and b"\n" not in head:  # the file was one "line", refused as a header that is not CSV
            yield BadRow(path, None, b"", CR_LINES)
            return
        for rec in _records(path, fmt, op):
            if parser.header is None:
                if rec.problem is not None:
                    why = f"cannot read the file ({rec.problem})" if rec.broken else (
                        f"cannot read its header row (line {rec.line}): {rec.problem}")
                    yield BadRow(path, None, rec.raw, why)
                    return
                if rec.fields:
                    if (twice := _repeated_column(rec.fields)) is not None:
                        yield BadRow(path, None, rec.raw, f"its header row (line {rec.line}) names {twice}; give "
                                     "each column a name of its own")
                        return
                    if (why := one_column_header(rec.fields, fmt)) is not None:
                        yield BadRow(path, None, rec.raw, why)
                        return
                    parser.header = rec
                continue
            if rec.broken:
                yield from parser.flush(path)
                yield BadRow(path, rec.line, b"", f"cannot read the file from line {rec.line} on ({rec.problem}); "
                             "the lines before it are read", broken=True)
                return
            if (rec.fields == [] and rec.problem is None) or (only is not None and rec.line not in only):
                continue  # a blank line is no record
            problem = rec.problem
            if problem is None and len(rec.fields) != len(parser.header.fields):
                problem = (f"{len(rec.fields)} field(s) where the header has {len(parser.header.fields)} "
                           f"({', '.join(parser.header.fields)})")
            if rec.line in skip:
                problem = problem or "recorded as unreadable by a finished shard (it enters the index by a retry)"
            if problem is not None:
                yield from parser.flush(path)
                yield BadRow(path, rec.line, rec.raw, problem)
                continue
            parser.add(rec)
            if len(parser.rows) >= batch_rows or parser.size >= FLUSH_BYTES:
                yield from parser.flush(path)
        yield from parser.flush(path)
    except READ_ERRORS as err:  # opening the file
        yield BadRow(path, None, b"", f"cannot read the file ({type(err).__name__}: {err})")


#: Delimiters other than the one given that a header row of one column may turn out to be separated by.
_DELIMITERS = (";", "\t", "|", ",")


def one_column_header(names: list[str], fmt: CsvFormat) -> str | None:
    """Why a header row read as one column is not read on, where another delimiter splits it into fields naming the
    text column (an Excel export with ``;``, a TSV named ``.csv``); else None. Said of the file before its rows, whose
    text (commas in it) made each row a failure of "11 field(s) where the header has 1" without a word of why."""
    if len(names) != 1 or fmt.text_field is None:
        return None
    other = next((d for d in _DELIMITERS if d != fmt.delimiter and fmt.text_field in names[0].split(d)), None)
    if other is None:
        return None
    return (f"the header row is one column, '{_shown(names[0])}': its fields are separated by '{_shown(other)}', not "
            f"'{_shown(fmt.delimiter)}'; read it with that delimiter (a spec's read step {{op: sources.csv, params: "
            f'{{path: ..., delimiter: "{_shown(other)}"}}}}, given as --spec; --source may still name the files)')


def _shown(text: str) -> str:
    """``text`` with its tabs written ``\\t``, as in a YAML string in double quotes."""
    return text.replace("\t", "\\t")


def _repeated_column(names: list[str]) -> str | None:
    """``'text' twice (columns 2 and 3)`` for the first name a header row gives two columns, else None."""
    for name in dict.fromkeys(names):
        at = [i + 1 for i, n in enumerate(names) if n == name]
        if len(at) > 1:
            places = ", ".join(map(str, at[:-1])) + f" and {at[-1]}"
            return f"'{name}' {'twice' if len(at) == 2 else f'{len(at)} times'} (columns {places})"
    return None


def read_rows_at(path: str, lines: Collection[int], fmt: CsvFormat, op: Any = None) -> dict[int, pa.Table | BadRow]:
    """For each of ``lines``, the record whose first line it is (with a ``__line`` column), read again for
    ``--retry-failed``, or why it is still bad; its values' types are inferred from it alone. One pass over the
    file, which stops once each line is read (a retry of many rows of a big file reads it once)."""
    wanted, got = set(lines), {}
    for item in iter_rows(path, fmt, batch_rows=1, only=wanted, op=op):
        if isinstance(item, BadRow) and (item.line is None or item.broken):  # the file, or its rest, is unreadable
            return {**got, **{line: item for line in wanted - got.keys()}}
        got[item.line if isinstance(item, BadRow) else item.column(LINE)[0].as_py()] = item
        if len(got) == len(wanted):
            break
    return {**got, **{line: BadRow(path, line, b"", f"no record of the file begins on line {line} now")
                      for line in wanted - got.keys()}}


class _Parser:
    """Good records gathered, then parsed by pyarrow with the header before them."""

    def __init__(self, fmt: CsvFormat, fix_types: bool = True):
        self.fmt, self.fix_types = fmt, fix_types
        self.header: _Record | None = None
        self.rows: list[_Record] = []
        self.size = 0
        self.types: dict[str, Any] = {name: pa.string() for name in fmt.text_columns}

    def add(self, rec: _Record) -> None:
        if not rec.raw.endswith(b"\n"):
            rec.raw += b"\n"  # the file's last line: another record may follow it in a batch
        self.rows.append(rec)
        self.size += len(rec.raw)

    def _parse(self, rows: list[_Record]) -> pa.Table:
        header = self.header.raw if self.header.raw.endswith(b"\n") else self.header.raw + b"\n"
        data = header + b"".join(r.raw for r in rows)
        table = pcsv.read_csv(
            io.BytesIO(data), read_options=pcsv.ReadOptions(block_size=max(1 << 20, len(data) + 1)),
            parse_options=pcsv.ParseOptions(delimiter=self.fmt.delimiter, quote_char=self.fmt.quote_char or False,
                                            newlines_in_values=True),
            convert_options=pcsv.ConvertOptions(column_types=self.types))
        if table.num_rows != len(rows):
            raise pa.ArrowInvalid(f"pyarrow reads {table.num_rows} row(s) where there are {len(rows)}")
        return table.append_column(LINE, pa.array([r.line for r in rows], pa.int64()))

    def flush(self, path: str) -> Iterator[pa.Table | BadRow]:
        rows, self.rows, self.size = self.rows, [], 0
        if not rows:
            return
        try:
            table = self._parse(rows)
        except pa.ArrowInvalid:  # a value that does not fit its column's type: find its row
            yield from self._one_by_one(path, rows)
            return
        self._fix_types(table)
        yield table

    def _one_by_one(self, path: str, rows: list[_Record]) -> Iterator[pa.Table | BadRow]:
        good: list[pa.Table] = []
        for rec in rows:
            try:
                good.append(self._parse([rec]))
                self._fix_types(good[-1])
            except pa.ArrowInvalid as err:
                if good:
                    yield pa.concat_tables(good, promote_options="permissive")
                    good = []
                yield BadRow(path, rec.line, rec.raw, f"a value does not fit its column ({self._named(err)}; the "
                             "column's type is that of the rows before it)")
        if good:
            yield pa.concat_tables(good, promote_options="permissive")

    def _named(self, err: pa.ArrowInvalid) -> str:
        """pyarrow's error with the column's name for its 0-based number (``In CSV column #2``), which a reader would
        count from 1 and look up in the header."""
        match = re.match(r"In CSV column #(\d+): (.*)", str(err), re.S)
        names = self.header.fields or [] if self.header is not None else []
        if match is None or int(match[1]) >= len(names):
            return str(err)
        return f"column '{names[int(match[1])]}': {match[2]}"

    def _fix_types(self, table: pa.Table) -> None:
        """Later batches get the types of the first rows (a column all empty so far is not fixed yet)."""
        if not self.fix_types:
            return
        for field in table.schema:
            if field.name != LINE and field.name not in self.types and not pa.types.is_null(field.type):
                self.types[field.name] = field.type
