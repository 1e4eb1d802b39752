"""Reading a source's records for staging and ``--retry-failed``, where one that cannot be read becomes a
``Failure`` in the ledger and the rest of the source is read on.

* JSONL (``sources.jsonl``, a BEIR corpus): read here line by line; a bad line is a failure of its file and
  line (``read:<path>:<line>``).
* CSV/TSV: a bad row (a quote never closed, a wrong number of fields, bytes that are not UTF-8, a value that
  does not fit its column) is a failure of its file and first line (``operators.sources.csv_rows``).
* Any source read a file a split (PDF, CSV, Parquet, JSONL): a file that cannot be read at all (a broken PDF,
  Parquet or gzip file, a CSV without its text column) is a failure of the file (``read:<path>``), and the
  other files go on. A file that breaks after its first documents were read (a gzip cut short): for JSONL
  and CSV, a failure at the line where it broke; for the others, the error stops the run, naming the file.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any, Callable, Collection, Iterator

import pyarrow as pa

from flows.ingestion.duplicates import SeenIds, content_id_note, duplicate_error
from flows.ingestion.errors import IngestError
from flows.ingestion.ledger import Failure, absolute
from operators.base import Source
from operators.sources._documents import JsonNumber
from operators.errors import OperatorError, SourceError, shown_name
from operators.output_checks import document_breach
from operators.sources._common import (
    BOM,
    DocumentMapper,
    DocumentParams,
    FileRange,
    first_record,
    iter_lines,
    json_line_problem,
    record_problem,
    whole_file_problem,
)
from operators.sources.csv_rows import LINE, BadRow
from operators.sources.encoding import FileDecoder, NotLineText, line_decoder, undecodable
from operators.sources.paths import warn_no_records

#: Errors of a file that cannot be read (the source's own, I/O, a corrupt gzip, bytes that are not text,
#: Arrow's for a broken Parquet file).
FILE_ERRORS = (SourceError, OSError, EOFError, UnicodeError, zlib.error, pa.ArrowException)
#: The params of a field named (``--id-field``, ``--title-field``) that no document of a JSONL file has: its failure.
NAMED_FIELDS = ("params.id_field", "params.title_field")
#: Sources whose splits are files (or a file's row groups), read by their own ``read``.
FILE_SOURCES = ("sources.pdf", "sources.parquet", "sources.files")
RECORDED = "recorded as unreadable by a finished shard (it enters the index by a retry)"


def read_split(op: Source, split: Any, skip: frozenset[str], seen: SeenIds | None = None
                ) -> Iterator[pa.Table | Failure]:
    """One split's tables, with a ``Failure`` for each CSV row, or file, that cannot be read, and for each document
    whose id ``seen`` saw before (when given). ``reading`` stages a source not read line by line so."""
    if op.name == "sources.csv":
        yield from _read_csv(op, split, skip, seen)
        return
    if op.name == "sources.parquet" and seen is not None:
        yield from _read_parquet(op, split, skip, seen)
        return
    for table in _read_split_files(op, split, skip):
        yield from (seen.split_rows(table) if seen is not None and isinstance(table, pa.Table) else (table,))


def _read_split_files(op: Source, split: Any, skip: frozenset[str], read: Callable[[Any], Iterator[Any]] | None = None
                      ) -> Iterator[Any]:
    """``read(split)`` (the source's ``read`` by default), with a file that cannot be read as a ``Failure``."""
    read = read or documents_read(op)
    path = _whole_file(split) if op.name in FILE_SOURCES else None
    if path is None:
        yield from read(split)
        return
    if f"read:{absolute(path)}" in skip:  # recorded by a finished shard: it enters the index by a retry
        yield _file_failure(path, RECORDED)
        return
    yield from read_file(op, split, read)


def documents_read(op: Source) -> Callable[[Any], Iterator[Any]]:
    """``op.read_checked``, each batch also checked to be documents (``output_checks.document_breach``: ``docno``
    and ``text``, a text ``title``): a plugin source's batch without them is an error naming its step and what it
    has, not a failure of the index's writer."""
    def read(split: Any) -> Iterator[Any]:
        for table in op.read_checked(split):
            if isinstance(table, pa.Table) and (problem := document_breach(table)):
                raise OperatorError(problem, op=op.name, step=op.step_id)
            yield table
    return read


def _whole_file(split: Any) -> str | None:
    """The file a split reads from its start (a path; the first byte range or row groups of a file)."""
    if isinstance(split, str):
        return split
    start = getattr(split, "start", getattr(split, "first", None))
    return getattr(split, "path", None) if start == 0 else None


def _file_failure(path: str, error: str) -> Failure:
    """A failure of the file ``path``; an error that begins with the path as the source named it (relative) names
    it by its absolute path, as the failure's ``path`` does (and the warning leaves it out once)."""
    where = absolute(path)
    if where != path and error.startswith(f"{path}: "):
        error = f"{where}: {error[len(path) + 2:]}"
    return Failure(id=f"read:{where}", stage="read", path=where, error=error)


def cannot_read(path: str, err: BaseException) -> str:
    """Why the file at ``path`` is left out: a name that is not UTF-8 (Python reads each such byte as a surrogate)
    said as that, not as the ``UnicodeEncodeError`` of storing it as a document's path."""
    if isinstance(err, UnicodeEncodeError) and any("\udc80" <= c <= "\udcff" for c in path):
        return (f"{shown_name(path)}: its name is not UTF-8, which a document's path must be: rename the file "
                "(convmv -f latin1 -t utf8 --notest FILE renames a Latin-1 name) and ingest again")
    if isinstance(err, OSError) and err.strerror:  # "(Permission denied)", not the error's class and the path again
        return f"{path}: cannot read it ({err.strerror})"
    return f"{path}: cannot read it ({type(err).__name__}: {err})"


def read_file(op: Source, split: Any, read: Callable[[Any], Iterator[Any]] | None = None
              ) -> Iterator[pa.Table | Failure]:
    """The documents of a file (the split ``split`` of ``op``, read by ``read``, the source's ``read`` by default);
    one that cannot be read before its first document is one ``Failure`` of the file (staging, and
    ``--retry-failed`` reading it again), after it an error."""
    path, started = _whole_file(split) or str(split), False
    try:
        for table in (read or documents_read(op))(split):
            started = True
            yield table
    except FILE_ERRORS as err:
        if started:  # its first documents are staged: the run stops, naming the file
            if isinstance(err, SourceError):
                raise
            raise SourceError(f"{path}: cannot read it past its first documents ({type(err).__name__}: {err})",
                              op=op.name, step=op.step_id) from err
        yield _file_failure(path, err.message if isinstance(err, SourceError) else cannot_read(path, err))


def read_whole(op: Source, path: str) -> Iterator[pa.Table | Failure]:
    """A file of the source ``op``, read again whole for ``--retry-failed`` (a file-level failure): its documents,
    and a ``Failure`` for each record (or the file) that still cannot be read."""
    plan = jsonl_plan(op)
    if plan is not None:
        yield from read_jsonl(op, [Path(path)], plan[1], plan[2])
    elif op.name == "sources.csv":
        yield from _read_csv(op, path, frozenset())
    elif op.name == "sources.parquet":
        from operators.sources.parquet import RowGroups

        yield from read_file(op, RowGroups(path, 0, -1))
    else:
        yield from read_file(op, path)


def _read_parquet(op: Source, split: Any, skip: frozenset[str], seen: SeenIds) -> Iterator[pa.Table | Failure]:
    """A Parquet split's documents; a document whose id ``seen`` saw before is a failure named by its file and row
    (its record kept: a retry ingests it once its id is free, or with ``--replace``)."""
    from operators.sources.parquet import ROW

    for item in _read_split_files(op, split, skip, op.read_located):
        if isinstance(item, Failure):
            yield item
            continue
        table, rows, where = item.table.drop_columns([ROW]), item.table.column(ROW).to_pylist(), absolute(item.path)
        number = seen.file(where, rows=True)
        yield from seen.split(table, lambda i: (number, rows[i]),
                              lambda i, doc_id, first: seen.row_failure(table, i, doc_id, first,
                                                                        f"{where} row {rows[i]}"))


# -- CSV ------------------------------------------------------------------------------------


def _read_csv(op: Source, split: Any, skip: frozenset[str], seen: SeenIds | None = None
              ) -> Iterator[pa.Table | Failure]:
    """A CSV split's documents; a row that cannot be read, or repeats an id ``seen`` saw before, is a failure of
    its file and first line (``read:<path>:<line>``), as a JSONL line is."""
    for item in op.read_located(split, lambda path: frozenset(_skipped_lines(skip, absolute(path)))):
        if isinstance(item, BadRow):
            yield _bad_row(item)
            continue
        table = item.table.drop_columns([LINE])
        if seen is None:
            yield table
            continue
        lines, where = item.table.column(LINE).to_pylist(), absolute(item.path)
        number = seen.file(where)
        yield from seen.split(table, lambda i: (number, lines[i]), lambda i, doc_id, first: Failure.of_line(
            where, lines[i], b"", duplicate_error(doc_id, first, content_id_note(table, i, doc_id))))


def _bad_row(bad: BadRow) -> Failure:
    if bad.line is None:
        return _file_failure(bad.path, f"{absolute(bad.path)}: {bad.reason}")
    return Failure.of_line(bad.path, bad.line, bad.raw, bad.reason)


# -- JSONL ----------------------------------------------------------------------------------


def jsonl_plan(op: Source) -> tuple[list[Path], DocumentParams, str] | None:
    """The files, params and text field of a source read here line by line (JSONL, a BEIR corpus), else None.
    ``reading`` stages such a source with ``read_jsonl`` and others with ``read_split``; ``retry`` reads lines."""
    if op.name == "sources.jsonl":
        from operators.sources.jsonl import SUFFIXES
        from operators.sources.paths import resolve_paths

        return resolve_paths(op.params.path, op=op, suffixes=SUFFIXES), op.params, op.params.text_field
    if op.name == "sources.beir":
        from operators.sources._beir_files import beir_file

        p = op.params
        if p.part != "corpus":
            raise IngestError("the read step reads BEIR queries; ingestion needs the corpus: set part: corpus",
                              step=op.step_id, op=op.name, field="params.part")
        params = DocumentParams(fields=p.fields, limit=p.limit, batch_rows=p.batch_rows)
        return [beir_file(p.folder, "corpus", op=op)], params, params.text_field
    return None


def read_jsonl(op: Source, paths: list[Path], params: DocumentParams, text_field: str,
                skip: frozenset[str] = frozenset(), seen: SeenIds | None = None) -> Iterator[Any]:
    """The documents of ``jsonl_plan``'s files, line by line, with a ``Failure`` for each line that cannot be read,
    each of ``skip`` and each id ``seen`` saw before. ``reading`` stages a source so (in its files' order)."""
    mapper = DocumentMapper(params, op=op)
    left = params.limit
    for path in paths:
        where = absolute(str(path))  # the ledger's path: a retry may run in another directory
        skipped = _skipped_lines(skip, where)
        if 0 in skipped:
            yield _file_failure(where, RECORDED)
            continue
        encoding = getattr(op.params, "encoding", None)
        decode = line_decoder(str(path), encoding, op)
        try:
            first = first_record(str(path), encoding, op)  # its columns come first in every batch of the file
        except FILE_ERRORS as err:
            wide = isinstance(err, NotLineText)  # UTF-16: its own words, not "cannot read it (NotLineText: ...)"
            yield _file_failure(where, f"{where}: {err.why}" if wide else cannot_read(where, err))
            continue
        number = seen.file(where) if seen is not None else -1
        batch: list[dict] = []
        lines: list[tuple[int, bytes]] = []

        def flush() -> Iterator[Any]:
            has_title, extras = mapper.record_columns(first, *batch, where=where)
            table = mapper.from_records(batch, has_title=has_title, extras=extras)
            if seen is None:
                yield table
                return
            at = list(lines)
            yield from seen.split(table, lambda i: (number, at[i][0]), lambda i, doc_id, first: Failure.of_line(
                where, at[i][0], at[i][1], duplicate_error(doc_id, first, content_id_note(table, i, doc_id))))

        index, began = -1, False
        try:
            for _, index, raw in iter_lines(FileRange(str(path))):
                raw = raw.removeprefix(BOM)  # any line's: files that each began with one, joined (``_common``)
                if not raw.strip():
                    continue
                if not began and (whole := whole_file_problem(raw)):  # a JSON array, objects over several lines:
                    yield _file_failure(where, f"{where}: {whole}")  # one failure of the file, not one per line
                    began = True  # said: not a file without records
                    break
                began = True
                record, error = _parse(raw, text_field, params.title_field, decode)
                if index + 1 in skipped:
                    error = error or RECORDED
                if error is not None:
                    if batch:  # keep failures in their place among the documents
                        yield from flush()
                        batch, lines = [], []
                    yield Failure.of_line(where, index + 1, raw, error)
                    continue
                batch.append(record)
                lines.append((index + 1, raw))
                if left is not None:
                    left -= 1
                if len(batch) == params.batch_rows or left == 0:
                    yield from flush()
                    batch, lines = [], []
                if left == 0:
                    return
            if batch:
                yield from flush()
            if not began:  # empty, or blank lines alone
                warn_no_records(op, path)
        except (OSError, EOFError, zlib.error) as err:  # a gzip cut short or corrupt: the lines before it are read
            if batch:
                yield from flush()
            line = index + 2
            yield Failure.of_line(where, line, b"", f"cannot read the file from line {line} on ({type(err).__name__}: "
                                  f"{err}); the lines before it are read")
        except SourceError as err:  # an id or title field named that its documents lack: a failure of the file
            if err.field not in NAMED_FIELDS:
                raise
            yield _file_failure(where, err.message)


def read_line_records(op: Source, path: str, lines: Collection[int]) -> dict[int, pa.Table | Failure]:
    """Each of ``lines`` (1-based) of a JSONL source file, or the CSV row that begins on it, read again for
    ``--retry-failed``: in one pass over the file, which stops once each line is read (a retry of many lines
    of a big file reads it once)."""
    if op.name == "sources.csv":
        return {line: _bad_row(got) if isinstance(got, BadRow) else got
                for line, got in op.read_rows_at(path, lines).items()}
    plan = jsonl_plan(op)
    if plan is None:
        raise IngestError(f"cannot re-read {path}:{min(lines)}: the read step '{op.name}' is not a JSONL or CSV "
                          "source", step=op.step_id, op=op.name)
    _, params, text_field = plan
    mapper = DocumentMapper(params, op=op)
    encoding = getattr(op.params, "encoding", None)
    decode = line_decoder(path, encoding, op)
    wanted, got, first = set(lines), {}, None
    try:
        for _, index, raw in iter_lines(FileRange(path)):
            if index + 1 not in wanted:
                continue
            record, error = _parse(raw.removeprefix(BOM), text_field, params.title_field, decode)
            if error is not None:
                got[index + 1] = Failure.of_line(path, index + 1, raw, error)
            else:
                first = first_record(path, encoding, op) if first is None else first
                has_title, extras = mapper.record_columns(first, record)
                got[index + 1] = mapper.from_records([record], has_title=has_title, extras=extras)
            if len(got) == len(wanted):
                return got
    except (OSError, EOFError, zlib.error) as err:
        return {**got, **{line: Failure.of_line(path, line, b"", f"cannot read the file up to line {line} "
                                                f"({type(err).__name__}: {err})") for line in wanted - got.keys()}}
    return {**got, **{line: Failure.of_line(path, line, b"", f"the file has fewer than {line} lines now")
                      for line in wanted - got.keys()}}


def _skipped_lines(skip: frozenset[str], where: str) -> set[int]:
    """The lines of the file ``where`` (absolute) among the ``skip`` ids ``read:<path>:<line>``, and 0 when the
    file itself is one (``read:<path>``: a file that could not be read); a relative path (a ledger written
    before paths were absolute) names the file when it is the end of ``where``."""
    lines, ours = set(), Path(where).parts
    if f"read:{where}" in skip:
        lines.add(0)
    for failure_id in skip:
        kind, _, rest = failure_id.partition(":")
        path, _, line = rest.rpartition(":")
        if kind != "read" or not line.isdigit():
            continue
        tail = tuple(p for p in Path(path).parts if p not in (".", ".."))
        if path == where or (not Path(path).is_absolute() and tail and ours[-len(tail):] == tail):
            lines.add(int(line))
    return lines


def _parse(raw: bytes, text_field: str, title_field: str = "title",
           decode: FileDecoder | None = None) -> tuple[dict | None, str | None]:
    """A JSONL line as a record, or the reason it is not one; ``decode``: its file's decoder (None: UTF-8)."""
    try:
        record = json.loads(raw if decode is None else decode(raw), parse_float=JsonNumber)  # 1e2 stays 1e2
    except UnicodeDecodeError as err:
        return None, undecodable(err, getattr(decode, "encoding", None))
    except json.JSONDecodeError as err:
        return None, json_line_problem(err)
    if not isinstance(record, dict):
        return None, f"a JSON {type(record).__name__}, not an object"
    if (problem := record_problem(record, text_field, title_field, raw)) is not None:  # no text field, or nothing in it
        return None, problem
    return record, None
