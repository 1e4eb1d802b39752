"""What a disk that refused a write said, in words, for the one-line errors of the writers outside an index.

Why one place: a full disk, a quota and a file size limit reach a writer as an ``OSError`` (``[Errno 28]``, from
pyarrow often ``Error writing bytes to file`` and no file named) or as a library's own error that carries Rust's
``(os error 28)`` (safetensors' ``SafetensorError``), and ``tessera bench``, ``tessera train`` and ``tessera run
--out`` each said it as an internal error. They say it the same way from here; index writes have their own words
(``operators.store.disk``: what an ingestion resumes), the step cache and the service theirs (SQLite's codes).
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from operators.byte_sizes import format_bytes

#: The errors of a disk that refuses a write, in words: full, over quota, past ``ulimit -f``.
REFUSED = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is exceeded",
           errno.EFBIG: "a file would grow past this process's file size limit (`ulimit -f`)"}


def refusal(err: BaseException | None) -> str | None:
    """What the disk said, where ``err`` (or an error it came from) is its refusal of a write; else None."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in REFUSED:
            return REFUSED[err.errno]
        for number, said in REFUSED.items():
            if f"(os error {number})" in str(err):
                return said
        err = err.__cause__ or err.__context__
    return None


def where(path: str | Path) -> str:
    """``the file system holding PATH, N free`` (the free space left out where it cannot be read), for a refusal's
    line: whether it is full, and how full."""
    existing = Path(os.path.abspath(path))
    while not existing.exists() and existing != existing.parent:  # a folder not made yet: the one it would be in
        existing = existing.parent
    try:
        return f"the file system holding {path}, {format_bytes(shutil.disk_usage(existing).free)} free"
    except OSError:
        return f"the file system holding {path}"
