"""Errors of the benchmarker: one line each, naming the bad argument or file."""

from __future__ import annotations

from operators.errors import TesseraError


class BenchError(TesseraError):
    """A benchmark cannot run: a missing dataset or qrels file, a bad --flow, --k or --baseline value."""
