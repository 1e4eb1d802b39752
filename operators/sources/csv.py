"""CSV/TSV document source."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Collection, Iterator

import pyarrow as pa
from pydantic import Field

from operators.base import Source
from operators.errors import SourceError
from operators.local_files import local_path
from operators.sources._common import DocumentMapper, DocumentParams, Located, rebatch
from operators.sources.csv_rows import LINE, BadRow, CsvFormat, iter_rows, read_rows_at
from operators.sources.encoding import ENCODING_HELP, encoding_param
from operators.sources.paths import resolve_paths, warn_no_records

#: The files this source reads in a folder or a glob.
SUFFIXES = (".csv", ".tsv", ".csv.gz", ".tsv.gz")


class CsvSource(Source):
    """Read documents from CSV or TSV files with a header row, mapping columns to ``docno, title, text``.

    Each file is one split (quoted fields may hold newlines, so a CSV file is not
    cut into byte ranges). The id, text and title columns are read as strings, so ids
    like ``007`` keep their zeros; other columns get the types pyarrow infers from a
    file's first rows. A bad row (a quote never closed, a wrong number of fields, bytes
    that are not UTF-8, a value that does not fit its column) is an error naming the
    file and the row's first line; ingestion records it in the failure ledger instead
    and reads on (``read_rows``, ``csv_rows``).

    Usage::

        CsvSource({"path": "docs.tsv", "delimiter": "\\t", "id_field": "id"})(pa.table({}))
        # docno, title, text, <other columns>
    """

    name = "sources.csv"

    class Params(DocumentParams):
        path: str = Field(..., min_length=1, json_schema_extra=local_path(),
                          description="A CSV/TSV file, a glob (`docs/*.csv`) or a folder of them.")
        delimiter: str = Field(",", min_length=1, max_length=1, description="Field delimiter, e.g. `,` or a tab.")
        quote_char: str | None = Field('"', min_length=1, max_length=1, description=(
            "Character that quotes fields; null: none, every quote is text (a TSV whose texts open with one)."))
        encoding: str | None = Field(None, description=ENCODING_HELP)
        _encoding = encoding_param()

    def produces(self) -> dict[str, str]:
        return {"docno": "id", "text": "text"}

    def _paths(self) -> list[Path]:
        return resolve_paths(self.params.path, op=self, suffixes=SUFFIXES)

    def splits(self) -> list[str | None]:
        paths = self._paths()
        return [None] if self.params.limit is not None else [str(p) for p in paths]

    def read(self, split: str | None) -> Iterator[pa.Table]:
        def tables() -> Iterator[pa.Table]:
            for item in self.read_rows(split):
                if isinstance(item, BadRow):
                    raise SourceError(item.message(), op=self.name, step=self.step_id)
                yield item

        yield from rebatch(tables(), self.params.batch_rows)

    def read_rows(self, split: str | None,
                  skip: Callable[[str], frozenset[int]] = lambda path: frozenset()) -> Iterator[pa.Table | BadRow]:
        """The split's documents, with a ``BadRow`` in its place for each row that is not one, in file order (at
        most ``limit`` documents). ``skip(path)``: the lines of a file to fail whatever they hold (0: the file)."""
        for item in self.read_located(split, skip):
            yield item if isinstance(item, BadRow) else item.table.drop_columns([LINE])

    def read_located(self, split: str | None,
                     skip: Callable[[str], frozenset[int]] = lambda path: frozenset()) -> Iterator[Located | BadRow]:
        """``read_rows`` with where each document is: its file, and its row's first line in a last column
        ``LINE`` (ingestion names a repeated id by its file and line, as for JSONL)."""
        left = self.params.limit
        for path in [split] if split is not None else [str(p) for p in self._paths()]:
            if 0 in skip(path):
                yield BadRow(path, None, b"", "recorded as unreadable by a finished shard (it enters the index by a "
                             "retry)")
                continue
            read = False
            for item in iter_rows(path, self._format(), batch_rows=self.params.batch_rows, skip=skip(path), op=self):
                read = True
                if isinstance(item, BadRow):
                    yield item
                    continue
                try:
                    docs = self._documents(item, path, carry=(LINE,))
                except SourceError as err:  # no text column: the file is not one of documents
                    yield BadRow(path, None, b"", err.message.removeprefix(f"{path}: "))
                    break
                if left is not None:
                    docs = docs.slice(0, left)
                    left -= docs.num_rows
                yield Located(path, docs)
                if left == 0:
                    return
            if not read:  # empty, or its header row alone
                warn_no_records(self, path)

    def read_rows_at(self, path: str, lines: Collection[int]) -> dict[int, pa.Table | BadRow]:
        """The row of ``path`` that begins on each of ``lines``, read again (``--retry-failed``) in one pass over the
        file, or why it is still bad."""
        return {line: self._row_document(path, line, got)
                for line, got in read_rows_at(path, lines, self._format(), self).items()}

    def _row_document(self, path: str, line: int, got: pa.Table | BadRow) -> pa.Table | BadRow:
        if isinstance(got, BadRow):
            return got
        try:
            return self._documents(got.drop_columns([LINE]), path)
        except SourceError as err:
            return BadRow(path, line, b"", err.message.removeprefix(f"{path}: "))

    def _format(self) -> CsvFormat:
        p = self.params
        mapper = DocumentMapper(p, op=self)
        return CsvFormat(p.delimiter, p.quote_char, tuple(dict.fromkeys((*mapper.id_fields, p.text_field,
                                                                        p.title_field))), p.encoding,
                         p.text_field)

    def _documents(self, rows: pa.Table, path: str, carry: tuple[str, ...] = ()) -> pa.Table:
        return DocumentMapper(self.params, op=self).from_table(rows, where=path, carry=carry)
