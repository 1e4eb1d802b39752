"""CSV/TSV document source."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow as pa
from pydantic import Field

from operators.base import Source
from operators.errors import SourceError
from operators.local_files import local_path
from operators.sources._common import DocumentMapper, DocumentParams, rebatch, resolve_paths


class CsvSource(Source):
    """Read documents from CSV or TSV files with a header row, mapping columns to ``docno, title, text``.

    Each file is one split (quoted fields may hold newlines, so a CSV file is not
    cut into byte ranges); it is streamed in blocks. The id, text and title columns
    are read as strings, so ids like ``007`` keep their zeros.

    Usage::

        CsvSource({"path": "docs.tsv", "delimiter": "\\t", "id_field": "id"})(pa.table({}))
        # docno, title, text, <other columns>
    """

    name = "sources.csv"

    class Params(DocumentParams):
        path: str = Field(..., min_length=1, json_schema_extra=local_path(), description="A CSV/TSV file, a glob (`docs/*.csv`) or a folder of them.")
        delimiter: str = Field(",", min_length=1, max_length=1, description="Field delimiter, e.g. `,` or a tab.")
        quote_char: str = Field('"', min_length=1, max_length=1, description="Character that quotes fields.")

    def produces(self) -> dict[str, str]:
        return {"docno": "id", "text": "text"}

    def _paths(self) -> list[Path]:
        return resolve_paths(self.params.path, op=self, suffixes=(".csv", ".tsv", ".csv.gz", ".tsv.gz"))

    def splits(self) -> list[str | None]:
        paths = self._paths()
        return [None] if self.params.limit is not None else [str(p) for p in paths]

    def read(self, split: str | None) -> Iterator[pa.Table]:
        from pyarrow import csv

        p = self.params
        mapper = DocumentMapper(p, op=self)
        paths = [split] if split is not None else [str(path) for path in self._paths()]
        as_text = {name: pa.string() for name in (p.id_field, *mapper.id_fields, p.text_field, p.title_field)}

        def tables() -> Iterator[pa.Table]:
            for path in paths:
                try:
                    reader = csv.open_csv(
                        path,
                        read_options=csv.ReadOptions(block_size=1 << 22),
                        parse_options=csv.ParseOptions(delimiter=p.delimiter, quote_char=p.quote_char,
                                                       newlines_in_values=True),
                        convert_options=csv.ConvertOptions(column_types=as_text),
                    )
                    for batch in reader:
                        yield mapper.from_table(pa.Table.from_batches([batch]), where=path)
                except pa.ArrowInvalid as err:
                    raise SourceError(f"{path}: cannot parse as CSV ({err})", op=self.name, step=self.step_id) from err

        yield from rebatch(tables(), p.batch_rows, p.limit)
