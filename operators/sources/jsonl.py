"""JSONL document source."""

from __future__ import annotations

from typing import Iterator, Literal

import pyarrow as pa
from pydantic import Field

from operators.base import Source
from operators.local_files import local_path
from operators.sources._common import (
    DocumentParams,
    FileRange,
    file_ranges,
    read_jsonl_documents,
)
from operators.sources.encoding import ENCODING_HELP, encoding_param
from operators.sources.paths import resolve_paths

SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")


class JsonlSource(Source):
    """Read documents from JSONL files (one JSON object a line), BEIR field names by default.

    Emits ``docno, title ("" where a record has none), text`` and the other fields
    as columns. A big file is cut into newline-aligned byte ranges (``num_splits``)
    that executors read in parallel; every line is read exactly once. A line that is
    not a JSON object, lacks the text field or has an empty one (null, "", whitespace)
    raises an error naming the file and line (``on_error="raise"``) or is skipped and
    counted in the log (``"skip"``). An empty id is a missing one: a content id.

    Usage::

        JsonlSource({"path": "data/sample/corpus.jsonl", "limit": 3})(pa.table({}))
        # 3 rows: docno ["wv00000", "wv00010", "wv00020"], title, text
    """

    name = "sources.jsonl"

    class Params(DocumentParams):
        path: str = Field(
            ..., min_length=1, json_schema_extra=local_path(),
            description="A JSONL file (.jsonl, .jsonl.gz), a glob (`corpus/*.jsonl`) or a folder of them.",
        )
        num_splits: int = Field(
            1, ge=1,
            description="Pieces to read in parallel: each file is one piece at least; above the file count, "
            "big files are cut into newline-aligned byte ranges (not .gz files).",
        )
        encoding: str | None = Field(None, description=ENCODING_HELP)
        _encoding = encoding_param()
        on_error: Literal["raise", "skip"] = Field(
            "raise",
            description="A bad line (not a JSON object, no text field, or an empty text): `raise` an error "
            "naming file and line, or `skip` it and log the count.",
        )

    def produces(self) -> dict[str, str]:
        return {"docno": "id", "text": "text"}

    def splits(self) -> list[FileRange | None]:
        paths = resolve_paths(self.params.path, op=self, suffixes=SUFFIXES)
        if self.params.limit is not None:
            return [None]  # "the first N documents" is only defined read in order
        return file_ranges(paths, self.params.num_splits)

    def read(self, split: FileRange | None) -> Iterator[pa.Table]:
        if split is None:
            ranges = [FileRange(str(p)) for p in resolve_paths(self.params.path, op=self, suffixes=SUFFIXES)]
        else:
            ranges = [split]
        yield from read_jsonl_documents(self, ranges, self.params, on_error=self.params.on_error)
