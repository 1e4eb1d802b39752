"""A write into an index that the disk refuses (full, over quota or a file size limit, read-only, not ours) as one
clear error.

numpy, pyarrow and FAISS raise such a failure as a bare ``OSError`` (``[Errno 28] No space left on device``, often
with no file name), which reached ``tessera ingest`` and ``tessera index add`` as an "internal error". Every index
write is all-or-nothing (write, then rename; the manifest last), so the error can say that nothing of the failed
write went in and what the index held before is intact, and what to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import Path
from typing import Iterator

from operators.byte_sizes import format_bytes
from operators.store.errors import IndexWriteError

#: The errors of a disk that refuses writes, and what to do about each.
_FULL = (errno.ENOSPC, errno.EDQUOT)
_NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def _existing(path: Path) -> Path:
    """``path``, or its nearest parent that exists (an index not made yet)."""
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def why(err: OSError, index_path: Path) -> str | None:
    """What the disk said, in words naming where; None for an ``OSError`` that is not the disk refusing a write."""
    if err.errno in _FULL:
        try:
            free = f", {format_bytes(shutil.disk_usage(_existing(index_path)).free)} free"
        except OSError:
            free = ""
        said = "no space left on the device" if err.errno == errno.ENOSPC else "the disk quota is exceeded"
        return (f"{said} (the file system holding {index_path}{free}). Free some space or give an index on another "
                "disk, then run the command again: an ingestion resumes where it stopped")
    if err.errno == errno.EFBIG:
        return ("a file would grow past this process's file size limit (`ulimit -f`). Raise the limit, then run the "
                "command again: an ingestion resumes where it stopped")
    if err.errno in _NOT_WRITABLE:
        said = f"the file system holding {index_path} is read-only" if err.errno == errno.EROFS else \
            f"permission denied on {err.filename or index_path}"
        return f"{said}. Make it writable or give an index path where this user can write, then run the command again"
    return None


@contextlib.contextmanager
def refused_by_disk(index_path: Path, doing: str) -> Iterator[None]:
    """Raise the disk's refusal of a write into the index at ``index_path`` as an ``IndexWriteError`` saying so;
    any other error goes on as it was."""
    try:
        yield
    except OSError as err:
        if err.errno == errno.ENOENT and not (Path(index_path) / "manifest.json").exists():
            from operators.store.errors import IndexNotFoundError

            raise IndexNotFoundError(f"index {index_path} was removed or moved while this ran ({doing}): nothing "
                                     "more was written there; ingest into a new index, or put the folder back and "
                                     "run the command again") from err
        said = why(err, index_path)
        if said is None:
            raise
        raise IndexWriteError(f"cannot write index {index_path} ({doing}): {said}. Nothing of this write was "
                              "committed: the index holds what it held before") from err
