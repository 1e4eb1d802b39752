"""The step cache's database: where its connections come from, and how a folder that cannot hold one is said.

Why apart from ``flows.cache``: opening the database (one connection per thread and process, opened again when
``tessera cache clear`` replaced the file; a read-only one for what only reads) and refusing a folder that is not a
step cache are one job, the units and explanations stored in it another. ``StepCache`` inherits ``CacheDatabase``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Iterator

from flows.cache_folder import (MARKER, heap_reading_connection, holds_other_files, later_layout, read_only_connection,
                                reading_connection, write_marker)
from operators.disk_refusal import refused_by
from operators.errors import CacheError

SCHEMA = """
CREATE TABLE IF NOT EXISTS units (
    key BLOB PRIMARY KEY,
    file TEXT,
    start INTEGER NOT NULL,
    count INTEGER NOT NULL,
    meta TEXT
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS steps (
    flow TEXT NOT NULL,
    step TEXT NOT NULL,
    step_key TEXT NOT NULL,
    explain TEXT NOT NULL,
    updated REAL NOT NULL,
    PRIMARY KEY (flow, step)
);
CREATE TABLE IF NOT EXISTS files (
    file TEXT PRIMARY KEY,
    bytes INTEGER NOT NULL,
    used REAL NOT NULL
);
"""


WAIT_FOR_LOCK_S = 60.0  # how long an open waits for others' locks (SQLite's busy timeout, and the retries below)


def _connect_when_free(database: Path) -> sqlite3.Connection:
    """A connection to ``database`` in WAL mode with the cache's tables, waiting for other processes opening it.

    Why the retries: where several processes open a fresh cache at once, switching it to WAL or creating the tables
    can fail at once with "database is locked" without SQLite calling its busy handler (the switch needs the file to
    itself), so the busy timeout alone does not wait.
    """
    deadline = time.monotonic() + WAIT_FOR_LOCK_S
    pause = 0.01
    while True:
        conn = sqlite3.connect(database, timeout=WAIT_FOR_LOCK_S, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(SCHEMA)
            return conn
        except sqlite3.OperationalError as err:
            conn.close()
            waiting = str(getattr(err, "sqlite_errorname", "")).startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))
            if not waiting or time.monotonic() > deadline:
                raise
        except BaseException:
            conn.close()
            raise
        time.sleep(pause)
        pause = min(pause * 2, 0.5)


def unwritable(root: Path) -> str | None:
    """Why a cache at ``root`` cannot be written here, or None: the nearest folder or file of it that is there (the
    database, ``data/``, the folder, else the parent it would be made in) on a read-only file system, or not
    writable by this user. A file where a folder goes is not this (``_open_database`` names it)."""
    for path in (root / "index.sqlite", root / "data", root, *root.parents):
        if path.exists():
            break
    else:
        return None
    if path.is_dir() or path.name == "index.sqlite":
        checked = [p for p in (root / "index.sqlite", root / "data", root) if p.exists()] or [path]
        if all(os.access(p, os.W_OK) for p in checked):
            return None
        with contextlib.suppress(OSError):
            if os.statvfs(path).f_flag & os.ST_RDONLY:
                return "a read-only file system"
        return "this user may not write there"
    return None


class CacheUnwritable(CacheError):
    """The disk refused to make or open the cache's files (``operators.disk_refusal.refused_by``): not the folder's
    fault, and no reason to stop a run, which goes on without the cache (``StepCache`` says so once)."""

    def __init__(self, root: Path, err: BaseException):
        self.strerror = getattr(err, "strerror", None) or str(err)
        super().__init__(f"cache directory {root}: {self.strerror}", field="cache_dir")


class CacheDatabase:
    """The connections of a step cache at ``root`` (a base of ``StepCache``, which sets ``root`` and ``_local``, and
    calls ``begin_run``)."""

    root: Path
    _off: str | None  # why this run stores nothing ("": it may store; None: not asked yet)
    _unreadable: bool  # the stored results could not be read either (said)
    _said: set[tuple[str, str]]  # why it stores nothing, and what to do: said (this run, or this benchmark)

    def read_only(self) -> str | None:
        """Why this run stores nothing in the cache, or None where it may: the folder cannot be written here (a
        read-only file system: a shared or restored cache mounted so; a folder this user may not write), asked once a
        run, or the disk refused a write (``stop_storing``). The run still reads what is stored there: it stopped at
        its first write with SQLite's 'attempt to write a readonly database' as an internal error, then ran without
        the cache, every stored result computed again."""
        if self._off is None:
            self._off = ""
            if why := unwritable(self.root):
                self.stop_storing(why, "pass --cache-dir DIR for a folder this user can write, or --no-cache")
        return self._off or None

    def stop_storing(self, why: str, what_to_do: str) -> None:
        """Store nothing more this run (``why``: a read-only file system, a full disk), said once in one line; reads
        go on (``_stored_reader``), so the results stored there are still served."""
        if self._off:
            return
        self._off = why
        if (why, what_to_do) not in self._said:
            self._said.add((why, what_to_do))
            logging.getLogger("flows.cache").warning(
                "the step cache %s cannot be written (%s): the run reads what is stored there and stores nothing "
                "new; %s", self.root, why, what_to_do)

    def begin_run(self, *, say_again: bool = True) -> None:
        """Ask again, for a run of a process that keeps this cache (``flows.api.step_caches``; each flow of a
        benchmark), whether it can be written: a folder made writable, or a disk freed, since the last run is written
        again, and a refusal is said once a run (``say_again``; else once for all the runs, unless its words change:
        a benchmark of five flows on a read-only cache said it once)."""
        self._off = None
        self._unreadable = False
        if say_again or not hasattr(self, "_said"):
            self._said = set()

    def ask_again(self) -> None:
        """For the next run of a command that keeps this cache (a benchmark's flow, a chat's question): ask again
        whether it can be written, as ``Flow.run`` asks each run, and say a refusal that stands no more (one refused
        write had left it unwritten for the rest of the command, after space came back too)."""
        self.begin_run(say_again=False)
        self.read_only()

    @contextlib.contextmanager
    def _stored_reader(self) -> Iterator[sqlite3.Connection | None]:
        """A connection that reads the units where this run stores none (``read_only``): this thread's own where it
        has one open (the disk refused a write after it opened), else one that writes nothing
        (``read_only_connection``), closed after; None where there is no database, or it cannot be read here
        (said once: then every unit is a miss)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid() and self._local.db == self._database_id():
            yield conn
            return
        database = self.root / "index.sqlite"
        if self._unreadable or not database.is_file():
            yield None
            return
        self._refuse_later_layout()
        try:
            conn = read_only_connection(database)
        except sqlite3.Error as err:
            self.cannot_read(err)
            yield None
            return
        try:
            yield conn
        finally:
            conn.close()

    def cannot_read(self, err: sqlite3.Error) -> None:
        """Say once that the stored results cannot be read either (a -wal file left without its -shm file on a
        read-only folder): every unit is then a miss, computed."""
        if not self._unreadable:
            self._unreadable = True
            logging.getLogger("flows.cache").warning(
                "the step cache %s cannot be read here either (%s): the run computes what it would have read there",
                self.root, err)

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection; opened again in a new process, or when the database file was replaced
        (``tessera cache clear`` by another process while this one holds the cache)."""
        conn = getattr(self._local, "conn", None)
        if conn is None or getattr(self._local, "pid", None) != os.getpid() or self._database_id() != self._local.db:
            if conn is not None:
                conn.close()
            conn = self._open()
            self._local.conn, self._local.pid, self._local.db = conn, os.getpid(), self._database_id()
        return conn

    def _database_id(self) -> tuple[int, int] | None:
        with contextlib.suppress(OSError):
            stat = (self.root / "index.sqlite").stat()
            return stat.st_dev, stat.st_ino
        return None

    def _open(self) -> sqlite3.Connection:
        with self._said_of_home():
            return self._open_database()

    @contextlib.contextmanager
    def _said_of_home(self) -> Iterator[None]:
        """A ``CacheError`` that, for the default cache, names $TESSERA_HOME (where the path came from) and the ways
        around it: every command that opens the step cache reports it the same way."""
        from flows.store import default_cache_dir
        from operators.home import tessera_home

        try:
            yield
        except CacheError as err:
            if self.root != default_cache_dir() or isinstance(err, CacheUnwritable):
                raise
            raise CacheError(f"the default step cache {self.root} ($TESSERA_HOME/cache, TESSERA_HOME="
                             f"{tessera_home()}) cannot be used: {err.message}; set TESSERA_HOME to a folder you "
                             "can write, or pass --cache-dir DIR or --no-cache", field="cache_dir") from None

    def _refuse_later_layout(self) -> None:
        """A ``CacheError`` naming the folder where a later release wrote this cache (``later_layout``)."""
        if refused := later_layout(self.root):
            raise CacheError(f"cache directory {self.root}: {refused}", field="cache_dir")

    def _open_database(self) -> sqlite3.Connection:
        root = self.root
        blocking = next((p for p in (root / "data", root, *root.parents) if p.exists() and not p.is_dir()), None)
        if blocking is not None:
            raise CacheError(f"cache directory {root}: {blocking} is a file, not a folder", field="cache_dir")
        fresh = not (root / "index.sqlite").exists()
        if fresh and root.is_dir() and holds_other_files(root) and not (root / MARKER).is_file():
            raise CacheError(f"cache directory {root} holds other files and no step cache: give an empty or "
                             "new folder", field="cache_dir")
        self._refuse_later_layout()
        try:
            (root / "data").mkdir(parents=True, exist_ok=True)
            write_marker(root)
            return _connect_when_free(root / "index.sqlite")
        except (sqlite3.DatabaseError, OSError) as err:
            if refused_by(err):  # the disk's doing, not the file's: "move it away" would have lost a good cache
                raise CacheUnwritable(root, err) from None
            if isinstance(err, sqlite3.OperationalError):  # a lock held past the wait: not the file's fault either
                raise CacheError(f"cache directory {root}: {root / 'index.sqlite'} could not be opened ({err})",
                                 field="cache_dir") from None
            if isinstance(err, sqlite3.DatabaseError):
                raise CacheError(f"{root / 'index.sqlite'} is not a step cache database ({err}): move it away, or "
                                 "give another --cache-dir", field="cache_dir") from None
            where = f"{err.filename}: " if err.filename else ""
            raise CacheError(f"cache directory {root}: {where}{err.strerror or err}", field="cache_dir") from None

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection | None]:
        """A connection that only reads the database, for what only reads it (``summary``, ``explain``: tessera cache
        info and explain), closed after; None where there is no database yet. Opening it as a run does would add
        this release's tables to an older release's cache and switch its journal, where reading promises to
        change nothing (docs/compatibility.md)."""
        self._refuse_later_layout()
        database = (self.root / "index.sqlite").absolute()
        if not database.is_file():
            yield None
            return
        # a folder that cannot be written: SQLite could not make the -shm file a run's last close removed
        try:
            conn = read_only_connection(database) if unwritable(self.root) else reading_connection(database)
        except sqlite3.OperationalError as err:  # a -wal file that cannot be copied to be read (``wal_snapshot``)
            raise CacheError(f"cache directory {self.root}: {database.name} could not be read here ({err}): run the "
                             "command where the folder can be written, or copy the folder there", field="cache_dir"
                             ) from None
        try:
            conn.execute("PRAGMA query_only = ON")
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the first read makes the -shm file
            except sqlite3.OperationalError as err:
                if not refused_by(err):
                    raise
                conn.close()
                conn = self._read_without_shm(database)
            yield conn
        except sqlite3.DatabaseError as err:
            if isinstance(err, sqlite3.OperationalError) and "no such table" not in str(err):
                raise  # a lock held too long, a disk error: not the file's fault
            raise CacheError(f"{database} is not a step cache database ({err}): move it away, or give another "
                             "--cache-dir", field="cache_dir") from None
        finally:
            conn.close()

    def _read_without_shm(self, database: Path) -> sqlite3.Connection:
        """A connection that reads ``database`` where the disk refused its -shm file (``heap_reading_connection``),
        or a ``CacheError`` in one line saying the disk refused and what to do."""
        conn = None
        try:
            conn = heap_reading_connection(database)
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as err:  # e.g. locked: a run holds it (then its -shm is there)
            if conn is not None:
                conn.close()
            raise CacheError(f"cache directory {self.root}: its disk refused a write, so {database.name} could not "
                             f"be read ({err}): free space there (tessera cache prune frees space without reading "
                             "it), then run the command again", field="cache_dir") from None

    def close(self) -> None:
        """Close this thread's database connection (the next use opens it again)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None
