"""Durable, all-or-nothing writes of files and folders.

Everything Tessera keeps on disk (index manifests and shards, token stores, trained
model folders) is written under a temporary name, flushed, then renamed into place,
so a reader sees the old version or the new one, never half of one, even after a
crash or a killed job. The helpers live here once so every writer gets the same
rename, swap and fsync.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path


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
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync(path.parent)
