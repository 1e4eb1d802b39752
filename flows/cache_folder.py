"""The step cache's folder: what marks it as one, what it holds, and deleting exactly that.

Why apart from ``flows.cache``: ``tessera cache clear`` deletes files, so what counts as the
cache's own is decided in one small place. The folder carries a marker file (``MARKER``); a
folder without it is a cache only if it is one from before markers (its ``index.sqlite`` has the
cache's tables and it holds nothing else). ``remove_cache_files`` deletes only the names in
``OWN_FILES`` and the Arrow files under ``data/``, never through a link, so a mistyped
``--cache-dir`` cannot delete someone's work.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

from operators.atomic import replaced_by, write_text

#: The file that says a directory is a Tessera step cache.
MARKER = "tessera-cache.json"
#: The folder's layout this release writes and reads, recorded in ``MARKER``: a later one is refused (``later_layout``),
#: since this release would misread its entries or write ones that Tessera misreads.
LAYOUT = 1
#: What a cache directory holds besides ``data/`` (anything else in it is left alone by ``clear``).
OWN_FILES = (MARKER, "index.sqlite", "index.sqlite-wal", "index.sqlite-shm", "index.sqlite-journal")


def holds_other_files(root: Path) -> bool:
    """Whether the folder ``root`` holds anything the cache did not write (the marker being written whole, under its
    temporary name, is the cache's: a run starting beside it took the folder for someone's)."""
    return any(e.name not in (*OWN_FILES, "data") and replaced_by(e.name) != MARKER for e in os.scandir(root))


def write_marker(root: Path) -> None:
    """Mark ``root`` as a step cache (once; an existing marker is kept), whole or not at all: a full disk had left an
    empty marker, which every later run refused as unreadable. An empty one (so left) is written again."""
    marker = root / MARKER
    if not marker.exists() or _cut_off(marker):
        write_text(marker, json.dumps({"tessera": "step cache", "layout": LAYOUT}) + "\n")


def _cut_off(marker: Path) -> bool:
    """Whether ``marker`` is an empty file: one whose write a full disk stopped (before markers were written whole)."""
    with contextlib.suppress(OSError):
        return marker.is_file() and marker.stat().st_size == 0
    return False


def later_layout(root: Path) -> str | None:
    """Why this release cannot use the cache at ``root`` (its marker names another layout), or None (also where
    ``root`` is no folder: what else is wrong there is its caller's to say)."""
    try:
        text = (root / MARKER).read_text(encoding="utf-8")
        marker = json.loads(text) if text else {"layout": LAYOUT}  # empty: cut off by a full disk (``write_marker``)
    except (FileNotFoundError, NotADirectoryError):
        return None  # a new folder, or a cache from before markers (layout 1)
    except (OSError, ValueError) as err:
        return f"its marker {root / MARKER} cannot be read ({err}); move the folder away, or give another one"
    layout = marker.get("layout") if isinstance(marker, dict) else None
    if layout == LAYOUT:
        return None
    return (f"it has layout {layout!r}, which a later Tessera wrote (this one reads layout {LAYOUT}): run that "
            "Tessera, or use another cache folder")


def is_cache_dir(root: Path) -> bool:
    """Whether ``root`` is a step cache: it has the marker, or (a cache from before markers) its
    ``index.sqlite`` has the cache's tables and it holds nothing the cache did not write."""
    if (root / MARKER).is_file():
        return True
    database = root / "index.sqlite"
    if not database.is_file() or holds_other_files(root):
        return False
    try:
        with sqlite3.connect(f"{database.absolute().as_uri()}?mode=ro", uri=True) as conn:  # ?, # and % quoted
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError:
        return False
    return {"units", "steps"} <= tables


def remove_cache_files(root: Path) -> None:
    """Delete what the cache wrote in ``root`` (a step cache: the caller checked ``is_cache_dir``), then the
    folders if nothing else is left in them."""
    data = root / "data"
    if data.is_symlink():
        data.unlink()
    elif data.is_dir():
        for entry in os.scandir(data):
            if entry.is_file(follow_symlinks=False) and entry.name.endswith((".arrow", ".tmp")):
                os.unlink(entry.path)
        with contextlib.suppress(OSError):
            data.rmdir()  # left in place if something else was put there
    for name in (n for n in OWN_FILES if n != MARKER):
        with contextlib.suppress(FileNotFoundError):
            (root / name).unlink()
    if holds_other_files(root) or data.is_dir():  # the folder stays (someone's file in it, or in data/): so does the
        return  # marker, which says the folder is a cache, so the next run uses it and the next clear clears it
    with contextlib.suppress(FileNotFoundError):  # the marker last: an interrupted clear can be run again
        (root / MARKER).unlink()
    with contextlib.suppress(OSError):
        root.rmdir()


def reading_connection(database: Path) -> sqlite3.Connection:
    """A connection to the cache's database that leaves its files as they are (``StepCache._reading``). Where a run
    left its -wal file (a process's last connection was never closed), a read-only connection reads it and leaves
    it: one that may write, the last to close, would fold it into the database. Where there is none, a read-only
    connection would leave the -wal and -shm files it made behind, while one that may write and does not (the
    caller sets query_only), the last to close, removes them."""
    held = database.with_name(database.name + "-wal").exists()
    return sqlite3.connect(f"{database.as_uri()}?mode=ro" if held else database, uri=held, timeout=60)


def heap_reading_connection(database: Path) -> sqlite3.Connection:
    """A connection that reads the cache's database without its -shm file, for a disk that refuses to make or grow
    it (full, over quota, ``ulimit -f``): ``tessera cache info`` and ``explain`` said SQLite's "disk I/O error".
    In exclusive locking mode SQLite keeps the WAL's index in this process's memory (sqlite.org/wal.html), so the
    -wal file's entries are read too; the lock is held only while the command reads. On close SQLite may fold the
    -wal into the database, as a run's last connection does, where the disk lets it."""
    conn = sqlite3.connect(database, timeout=5, isolation_level=None)
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    conn.execute("PRAGMA query_only = ON")
    return conn


def read_only_connection(database: Path) -> sqlite3.Connection:
    """A connection that reads the cache's database and writes nothing, for a cache that cannot be written (a
    read-only file system or folder, a full disk): where its -wal file holds entries, SQLite's read-only mode, which
    reads them through the -shm file the writer left, or, where that -shm file is gone (a backup or restore that left
    it out), a copy read in memory (``wal_snapshot``); where none does (the last connection folded the log in and
    removed both), the database file alone, as immutable: SQLite's read-only mode would make a -shm file, which that
    folder refuses ("unable to open database file"). A unit's entry is never changed once written (only added or
    deleted), so an entry read is one a run stored; a read that a writer beside it tore fails, and its units are
    misses (``StepCache.get``)."""
    wal = database.with_name(database.name + "-wal")
    held = wal.is_file() and wal.stat().st_size > 0
    if held and not database.with_name(database.name + "-shm").exists():
        conn = wal_snapshot(database)
    else:
        conn = sqlite3.connect(f"{database.absolute().as_uri()}?{'mode=ro' if held else 'immutable=1'}", uri=True,
                               timeout=60, isolation_level=None)
    conn.execute("PRAGMA query_only = ON")
    return conn


def wal_snapshot(database: Path) -> sqlite3.Connection:
    """An in-memory copy of ``database`` with its -wal file's entries, where the -wal file is there and its -shm file
    is not and cannot be made (a read-only folder): SQLite opens such a database in no mode (its read-only mode
    needs the -shm file; immutable ignores the -wal, whose entries would be lost, or half a checkpoint read). Both
    files are copied to a private folder, where SQLite recovers the log as it does after a crash and folds it in.
    No -shm file means no connection has the database open; one that opened it while the files were copied (a -shm
    file made, a file changed) makes the copy an OperationalError, and the caller reads nothing."""
    files = [database, database.with_name(database.name + "-wal")]
    shm = database.with_name(database.name + "-shm")
    try:
        before = [_stamp(f) for f in files]
        image = _snapshot.get((database, *before)) or _copied_image(database, files, shm, before)
    except OSError as err:  # no room in the temporary folder, the -wal file gone meanwhile
        raise sqlite3.OperationalError(f"its -wal file could not be copied to read it: {err}") from None
    _snapshot.clear()  # one image kept: a run's every read of the cache gets it, not a copy of the files each
    _snapshot[(database, *before)] = image
    conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
    conn.deserialize(image)
    return conn


#: The last image ``wal_snapshot`` made, by the database and the stamps of its two files.
_snapshot: dict[tuple, bytes] = {}


def _copied_image(database: Path, files: list[Path], shm: Path, before: list[tuple[int, int, int]]) -> bytes:
    """The database's bytes with its -wal file's entries folded in, made in a private folder (``wal_snapshot``)."""
    with tempfile.TemporaryDirectory(prefix="tessera-cache-") as folder:
        copies = [Path(folder) / f.name for f in files]
        for file, copy in zip(files, copies):
            shutil.copyfile(file, copy)
        if shm.exists() or [_stamp(f) for f in files] != before:
            raise sqlite3.OperationalError(f"{database} changed while it was read: a run is writing it")
        with contextlib.closing(sqlite3.connect(copies[0], isolation_level=None)) as copy:
            copy.execute("PRAGMA journal_mode = DELETE")  # recovers the log, folds it in: the file is no WAL's
        return copies[0].read_bytes()


def _stamp(file: Path) -> tuple[int, int, int]:
    stat = file.stat()
    return stat.st_ino, stat.st_size, stat.st_mtime_ns
