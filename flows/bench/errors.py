"""Errors of the benchmarker: one line each, naming the bad argument or file."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterator

from operators.disk_refusal import refusal
from operators.errors import TesseraError


class BenchError(TesseraError):
    """A benchmark cannot run: a missing dataset or qrels file, a bad --flow, --k or --baseline value."""


@contextlib.contextmanager
def writing_out(out: Path, what: str) -> Iterator[None]:
    """A write under ``--out`` (``what``: a run, the metrics) that the disk refuses, as a ``BenchError`` naming the
    folder and what to do, where pyarrow's bare ``OSError`` (``[Errno 28] Error writing bytes to file``, no file
    named) was an internal error. The runs saved before it stay, so the same command resumes after them."""
    try:
        yield
    except OSError as err:
        if (said := refusal(err)) is None:
            raise
        raise BenchError(f"cannot write --out {out} ({what}): {said}; free space there (or give "
                         "another --out), then run the same command again: the flows whose runs were saved are not "
                         "run again", field="out") from None
