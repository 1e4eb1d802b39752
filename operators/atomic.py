"""Durable, all-or-nothing writes of files and folders, and the file digests that check them.

Everything Tessera keeps on disk (index manifests and shards, token stores, trained
model folders) is written under a temporary name, flushed, then renamed into place,
so a reader sees the old version or the new one, never half of one, even after a
crash or a killed job. The helpers live here once so every writer gets the same
rename, swap and fsync, and every reader the same digest of what was written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import threading
import uuid
from pathlib import Path
from typing import Iterator

# Digests by (path, size, mtime_ns): a file that did not change is read once per process.
_digests: dict[tuple[str, int, int], str] = {}
_digests_lock = threading.Lock()


def file_sha256(path: Path, *, remember: bool = True) -> str:
    """The hex sha256 of a file's bytes.

    A corpus's digest is part of every cache key that reads it, so by default it is
    remembered per (path, size, mtime) and an unchanged file is read once per process.
    A checksum check passes ``remember=False``: it exists to catch bytes that changed
    under the same stat, so it reads them every time.
    """
    key = None
    if remember:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
        with _digests_lock:
            if key in _digests:
                return _digests[key]
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if key is not None:
        with _digests_lock:
            _digests[key] = digest.hexdigest()
    return digest.hexdigest()


def fsync(path: Path) -> None:
    """Flush a file (or a folder's entries) to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(folder: Path) -> None:
    """Flush every file under ``folder`` (a model a library saved without flushing)."""
    for path in Path(folder).rglob("*"):
        if path.is_file():
            fsync(path)


def replace_folder(tmp: Path, final: Path) -> None:
    """Rename the finished folder ``tmp`` to ``final``, durably. An existing ``final`` (an
    earlier version, a store being rebuilt) is swapped out first and removed afterwards."""
    if final.exists():
        trash = final.with_name(f".trash-{final.name}-{uuid.uuid4().hex[:12]}")
        os.rename(final, trash)
        os.rename(tmp, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.rename(tmp, final)
    fsync(final.parent)


def write_text(path: Path, text: str) -> Path:
    """``write_bytes`` of UTF-8 text; returns ``path``."""
    write_bytes(path, text.encode("utf-8"))
    return path


def write_bytes(path: Path, data: bytes) -> None:
    """Write ``path`` whole or not at all: a flushed temporary sibling, then a rename."""
    with replacing(path) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)


#: The end of the name of ``replacing``'s temporary sibling: ``.<name>.<pid>.<random>.tmp``.
REPLACING_SUFFIX = ".tmp"


def replaced_by(name: str) -> str | None:
    """The name of the file that the temporary sibling ``name`` (``replacing``'s) is being written for; None when
    ``name`` is no such sibling. A folder's reader tells a writer's file in flight from someone else's file by it."""
    written = re.fullmatch(rf"\.(.+)\.\d+\.[0-9a-f]{{8}}{re.escape(REPLACING_SUFFIX)}", name)
    return written.group(1) if written else None


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A temporary sibling of ``path`` for a writer (a library that writes to a path) to fill; flushed and renamed
    over ``path`` when the block ends, removed when it fails or is interrupted. The name is this process's own
    (pid and a random part), so writers of the same file at once never share one: the last to finish wins, whole."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{REPLACING_SUFFIX}")
    try:
        yield tmp
        fsync(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync(path.parent)
