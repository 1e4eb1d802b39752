"""Errors of the benchmarker: one line each, naming the bad argument or file."""

from __future__ import annotations

import contextlib
import errno
from pathlib import Path
from typing import Iterator

from operators.errors import TesseraError

#: Why the disk refused a write, in words, by errno: full, over quota, past ``ulimit -f``.
_REFUSED = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exceeded",
            errno.EFBIG: "a file would grow past this process's file size limit (`ulimit -f`)"}


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
        if err.errno not in _REFUSED:
            raise
        raise BenchError(f"cannot write --out {out} ({what}): {_REFUSED[err.errno]}; free space there (or give "
                         "another --out), then run the same command again: the flows whose runs were saved are not "
                         "run again", field="out") from None
