"""Parquet document source."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
from pydantic import Field

from operators.base import Source
from operators.errors import SourceError
from operators.local_files import local_path
from operators.sources._common import DocumentMapper, DocumentParams, Located, rebatch
from operators.sources.paths import resolve_paths

#: The files this source reads in a folder or a glob.
SUFFIXES = (".parquet", ".pq")


#: The column ``read_located`` adds: each document's 1-based row in its file.
ROW = "__row"


@dataclass(frozen=True)
class RowGroups:
    """Row groups ``[first, last)`` of one Parquet file: one split."""

    path: str
    first: int
    last: int


class ParquetSource(Source):
    """Read documents from Parquet files, mapping columns to ``docno, title, text``.

    Splits are groups of row groups, so executors read big files in parallel
    (``num_splits``). Columns not mapped are kept as metadata (or only ``fields``).

    Usage::

        ParquetSource({"path": "corpus/*.parquet", "id_field": "doc_id"})(pa.table({}))
        # docno, title, text, <other columns>
    """

    name = "sources.parquet"

    class Params(DocumentParams):
        path: str = Field(
            ..., min_length=1, json_schema_extra=local_path(),
            description="A Parquet file, a glob (`docs/*.parquet`) or a folder of them.",
        )
        num_splits: int = Field(
            1, ge=1,
            description="Pieces to read in parallel: each file is one piece at least; above the file count, "
            "files are cut between row groups.",
        )

    def produces(self) -> dict[str, str]:
        return {"docno": "id", "text": "text"}

    def _paths(self):
        return resolve_paths(self.params.path, op=self, suffixes=SUFFIXES)

    def splits(self) -> list[RowGroups | None]:
        paths = self._paths()
        if self.params.limit is not None:
            return [None]
        groups = [_row_groups(p) for p in paths]
        total = sum(n for n in groups if n is not None) or 1
        splits: list[RowGroups | None] = []
        for path, n in zip(paths, groups):
            if n is None:  # not a Parquet file pyarrow can open: one split, whose read says why
                splits.append(RowGroups(str(path), 0, -1))
                continue
            pieces = max(1, min(n, round(self.params.num_splits * n / total)))
            bounds = [n * i // pieces for i in range(pieces + 1)]
            splits.extend(RowGroups(str(path), a, b) for a, b in zip(bounds, bounds[1:]))
        return splits

    def read(self, split: RowGroups | None) -> Iterator[pa.Table]:
        yield from rebatch((located.table.drop_columns([ROW]) for located in self.read_located(split)),
                           self.params.batch_rows)

    def read_located(self, split: RowGroups | None) -> Iterator[Located]:
        """``read``'s documents a file's batch at a time, with each one's row in the file (1-based, counting rows
        without text too) in a last column, ``ROW``: ingestion names a repeated id by its file and row."""
        import pyarrow.parquet as pq

        p = self.params
        mapper = DocumentMapper(p, op=self)
        pieces = [split] if split is not None else [RowGroups(str(path), 0, -1) for path in self._paths()]
        left = p.limit
        for piece in pieces:
            try:
                file = pq.ParquetFile(piece.path)
            except (pa.ArrowException, OSError) as err:
                raise SourceError(f"{piece.path}: cannot read as Parquet ({type(err).__name__}: {err})",
                                  op=self.name, step=self.step_id) from err
            last = file.metadata.num_row_groups if piece.last < 0 else piece.last
            row = sum(file.metadata.row_group(g).num_rows for g in range(piece.first))
            for batch in file.iter_batches(batch_size=p.batch_rows, row_groups=range(piece.first, last)):
                # from numpy, not a Python range: 0.01 ms against 3.3 ms for 8,192 rows
                rows = pa.array(np.arange(row + 1, row + 1 + batch.num_rows, dtype=np.int64))
                row += batch.num_rows
                docs = mapper.from_table(pa.Table.from_batches([batch]).append_column(ROW, rows), where=piece.path,
                                         carry=(ROW,))
                if left is not None:
                    docs = docs.slice(0, left)
                    left -= docs.num_rows
                if docs.num_rows:
                    yield Located(piece.path, docs)
                if left == 0:
                    return


def _row_groups(path) -> int | None:
    """The row groups of a Parquet file, or None if it cannot be opened (its read raises, naming it)."""
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).metadata.num_row_groups
    except (pa.ArrowException, OSError):
        return None
