"""Bounding the step cache: evict stored outputs by age and least-recent use (``StepCache.prune``).

Why by file: one ``put`` writes the units of a batch into one Arrow file, so a file is what frees disk
space; its units are dropped with it and recomputed when a run needs them again. The ``files`` table
records each file's size and last use (a hit marks it, at most once a minute). Files of a cache made
before that table (or left by a crash) have no row: their size and modification time stand in.
"""

from __future__ import annotations

import contextlib
import json
import math
import numbers
import os
import re
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator

from operators.disk_refusal import refused_by
from operators.errors import CacheError, short_repr

#: Binary units, also as Tessera prints them (``operators.byte_sizes``: ``2.0 GiB``), so a printed size reads back.
SIZE_UNITS = {"": 1, "B": 1, **{f"{prefix}{suffix}": 1024 ** power for power, prefix in enumerate("KMGT", 1)
                                for suffix in ("", "B", "IB")}}


#: Seconds a stored file that backs no unit is left alone by a prune: a ``put`` renames its file in place before it
#: records the units. One older is waste (a run beside it stored the same units first, before puts checked that).
ORPHAN_GRACE_S = 300.0

#: The rows of ``units`` that are model calls an unfinished batch saved (``flows.cache_calls``): no rows stored, the
#: metadata ``{"call": reply, "saved": time}``.
SAVED_CALLS = "file IS NULL AND meta LIKE '{\"call\": %'"


def parse_size(text: str) -> int:
    """Bytes of ``500M``, ``2G``, ``1.5GB``, ``1048576`` (binary units); a ``ValueError`` says what is accepted."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = match.group(2).upper() if match else None
    if match is None or unit not in SIZE_UNITS:
        raise ValueError(f"'{text}' is not a size: give a number of bytes or one with K, M, G or T (500M, 2G)")
    return int(float(match.group(1)) * SIZE_UNITS[unit])


def stored_files(conn: sqlite3.Connection | None, data: Path) -> list[tuple[str, int, float]]:
    """Every stored output file: (name, bytes, last use), least recently used first (with no database, by the
    files' modification times)."""
    try:
        known = {} if conn is None else {file: (size, used) for file, size, used in
                                         conn.execute("SELECT file, bytes, used FROM files")}
    except sqlite3.OperationalError:  # an older release's cache, read as it is: no table of last uses yet
        known = {}
    found = []
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):  # no data folder (a file there): none stored
        for entry in os.scandir(data):
            if not entry.is_file(follow_symlinks=False) or not entry.name.endswith(".arrow"):
                continue
            if entry.name in known:
                found.append((entry.name, *known[entry.name]))
            else:
                with contextlib.suppress(FileNotFoundError):
                    stat = entry.stat(follow_symlinks=False)
                    found.append((entry.name, stat.st_size, stat.st_mtime))
    return sorted(found, key=lambda f: (f[2], f[0]))


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction on ``conn``, rolled back when its body fails (where SQLite did not already roll back a
    write the disk refused): every write of the step cache's database."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
        raise


def summary(conn: sqlite3.Connection, data: Path) -> dict[str, Any]:
    """What the cache holds, for deciding on a prune: stored output files and their bytes, units, saved model calls,
    the steps it recorded (``flow``, ``step``) and when its files were last and least recently used (epoch seconds,
    None when it has none)."""
    files = stored_files(conn, data)
    units = conn.execute("SELECT COUNT(*) FROM units WHERE file IS NOT NULL").fetchone()[0]
    calls = conn.execute(f"SELECT COUNT(*) FROM units WHERE {SAVED_CALLS}").fetchone()[0]
    steps, flows = conn.execute("SELECT COUNT(*), COUNT(DISTINCT flow) FROM steps").fetchone()
    return {"files": len(files), "bytes": sum(size for _, size, _ in files), "units": units, "calls": calls,
            "steps": steps, "flows": flows, "least_recent_use": files[0][2] if files else None,
            "last_use": files[-1][2] if files else None,  # least recently used first
            "operators": operator_units(conn)}


def operator_units(conn: sqlite3.Connection) -> dict[str, int]:
    """The stored units (with rows) of each operator, by the tag their keys start with (``cache_keys.operator_tag``),
    named by the step records; ``(other)`` for keys an earlier release made (no tag) and operators no record names:
    what ``tessera cache clear --operator NAME`` would remove."""
    from flows.cache_keys import OPERATOR_TAG_BYTES, operator_tag

    by_tag = {operator_tag(name): name for name in recorded_operators(conn)}
    found: dict[str, int] = {}
    for tag, count in conn.execute(f"SELECT substr(key, 1, {OPERATOR_TAG_BYTES}), COUNT(*) FROM units "
                                   "WHERE file IS NOT NULL GROUP BY 1"):
        name = by_tag.get(bytes(tag), "(other)")
        found[name] = found.get(name, 0) + count
    return dict(sorted(found.items(), key=lambda item: (item[0] == "(other)", item[0])))


def recorded_operators(conn: sqlite3.Connection) -> list[str]:
    """The operators whose steps the cache recorded a run of (``StepCache.record_step``), sorted."""
    return sorted({json.loads(explain).get("op") for (explain,) in conn.execute("SELECT explain FROM steps")}
                  - {None})


def checked_bounds(max_bytes: Any, older_than_s: Any) -> tuple[int | None, float | None]:
    """``prune``'s bounds as it uses them, a size such as ``"2G"`` read as bytes (``parse_size``, as the CLI reads
    ``--max-size``); anything else is a ``CacheError`` naming the argument, as the CLI refuses it, so a string or a
    negative number is not compared as it is (a ``TypeError``), nor a prune with no bound a silent no-op."""
    if max_bytes is None and older_than_s is None:
        raise CacheError("give max_bytes (bytes, or a size such as '2G'), older_than_s (seconds) or both; "
                         "prune() without either removes nothing", field="max_bytes")
    return _max_bytes(max_bytes), _older_than_s(older_than_s)


def _max_bytes(value: Any) -> int | None:
    """``max_bytes`` as a whole number of bytes (see ``checked_bounds``)."""
    if isinstance(value, str):
        try:
            value = parse_size(value)
        except ValueError as err:
            raise CacheError(str(err), field="max_bytes") from None
    if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0):
        raise CacheError(f"takes a number of bytes (an int, 0 or more) or a size such as '500M' or '2G', got "
                         f"{short_repr(value)}", field="max_bytes")
    return None if value is None else int(value)


def _older_than_s(value: Any) -> float | None:
    """``older_than_s`` as seconds (see ``checked_bounds``): a finite number, 0 or more."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise CacheError(f"takes a number of seconds, 0 or more (30 days: 30 * 86400), got {short_repr(value)}",
                         field="older_than_s")
    return float(value)


def nothing_pruned(max_bytes: Any, older_than_s: Any) -> dict[str, int]:
    """What ``prune`` returns where there is no cache: zeros, once its bounds are checked as a prune checks them."""
    checked_bounds(max_bytes, older_than_s)
    return {"files": 0, "units": 0, "bytes": 0, "files_left": 0, "bytes_left": 0, "unfinished": 0, "calls": 0}


def prune(conn: sqlite3.Connection | None, data: Path, *, max_bytes: Any, older_than_s: Any) -> dict[str, int]:
    """Remove the files that back no unit, then those unused for ``older_than_s`` seconds, then the least recently
    used until the rest hold at most ``max_bytes``, with their units. Returns counts removed (``files``, ``units``,
    ``bytes``) and left. ``conn`` None (a disk too full for SQLite to open the database): the files alone, by their
    modification times; their entries are misses that the next run drops."""
    max_bytes, older_than_s = checked_bounds(max_bytes, older_than_s)
    files = stored_files(conn, data)
    total = sum(size for _, size, _ in files)
    cutoff = time.time() - older_than_s if older_than_s is not None else None
    backing = {file for (file,) in conn.execute("SELECT DISTINCT file FROM units WHERE file IS NOT NULL")} \
        if conn is not None else {name for name, _, _ in files}  # (with no database, none counts as an orphan)
    settled = time.time() - ORPHAN_GRACE_S  # (a put renames its file before it records the units)
    evict = [name for name, _, used in files if name not in backing and used < settled]  # backing no unit: first
    total -= sum(size for name, size, _ in files if name in evict)
    for name, size, used in files:  # oldest use first
        if name in evict:
            continue
        if (cutoff is not None and used < cutoff) or (max_bytes is not None and total > max_bytes):
            evict.append(name)
            total -= size
    units, removed = 0, 0
    sizes = {name: size for name, size, _ in files}
    for i in range(0, len(evict) if conn is not None else 0, 500):  # entries first: none points at a gone file
        chunk = evict[i:i + 500]
        try:
            units += _forget_files(conn, chunk)
        except sqlite3.OperationalError as err:
            if not refused_by(err):
                raise
            # a full disk has no room to record the deletion, so the files go first (a unit whose file is gone is
            # a miss, dropped when a run reads it), then their entries in the room they left: the prune that frees
            # a full disk was an internal error ("database or disk is full") that freed nothing
            removed += _unlink(data, chunk, sizes)
            with contextlib.suppress(sqlite3.OperationalError):
                units += _forget_files(conn, chunk)
    removed += _unlink(data, evict, sizes)
    unfinished, unfinished_bytes = remove_unfinished(data)
    calls = remove_old_calls(conn, cutoff) if cutoff is not None and conn is not None else 0
    return {"files": len(evict), "units": units, "bytes": removed + unfinished_bytes,
            "files_left": len(files) - len(evict), "bytes_left": total, "unfinished": unfinished, "calls": calls}


def _forget_files(conn: sqlite3.Connection, files: list[str]) -> int:
    """Delete the entries of ``files`` (units and file rows) in one transaction; how many units went."""
    marks = ",".join("?" * len(files))
    with transaction(conn):
        units = conn.execute(f"DELETE FROM units WHERE file IN ({marks})", files).rowcount
        conn.execute(f"DELETE FROM files WHERE file IN ({marks})", files)
    return units


def _unlink(data: Path, files: list[str], sizes: dict[str, int]) -> int:
    """Remove ``files`` from ``data`` (those already gone are skipped); the bytes freed."""
    removed = 0
    for name in files:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(data / name)
            removed += sizes[name]
    return removed


def remove_old_calls(conn: sqlite3.Connection, cutoff: float) -> int:
    """Forget the model calls an unfinished batch saved before ``cutoff`` (``flows.cache_calls``: entries of no rows
    whose metadata is ``{"call": reply, "saved": time}``; one saved before the time was recorded counts as old). A
    batch that ends drops its own; one interrupted and never rerun left them for good. Returns how many."""
    old = []
    for key, meta in conn.execute(f"SELECT key, meta FROM units WHERE {SAVED_CALLS}"):
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            record = json.loads(meta)
            if isinstance(record.get("call"), dict) and float(record.get("saved") or 0) < cutoff:
                old.append(key)
    forget_calls(conn, old)
    return len(old)


def forget_calls(conn: sqlite3.Connection, keys: list[bytes]) -> None:
    """Delete the entries of ``keys`` that store no rows (saved model calls), in one transaction, 500 keys a
    statement (SQLite's limit on bound values was 999 before 3.32)."""
    if not keys:
        return
    with transaction(conn):
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            conn.execute(f"DELETE FROM units WHERE file IS NULL AND key IN ({','.join('?' * len(chunk))})", chunk)


def forget_prefix(conn: sqlite3.Connection, data: Path, prefix: bytes) -> dict[str, int]:
    """Delete the units whose key starts with ``prefix`` (an operator's: ``cache_keys.operator_tag``), saved model
    calls among them, and their stored files; returns the units, calls, files and bytes removed. One ``put`` stores
    one step's units in a file, so those files back nothing else (checked in the same transaction, so a run storing
    beside this one keeps what it stores); a run reading a removed file takes it as a miss."""
    after = (int.from_bytes(prefix, "big") + 1).to_bytes(len(prefix), "big") if prefix.strip(b"\xff") else None
    where, args = ("key >= ? AND key < ?", (prefix, after)) if after else ("key >= ?", (prefix,))
    with transaction(conn):
        units, calls = conn.execute(f"SELECT COUNT(file), COUNT(CASE WHEN {SAVED_CALLS} THEN 1 END) FROM units "
                                    f"WHERE {where}", args).fetchone()
        files = [f for (f,) in conn.execute(f"SELECT DISTINCT file FROM units WHERE {where} AND file IS NOT NULL",
                                            args)]
        conn.execute(f"DELETE FROM units WHERE {where}", args)
        kept, sizes = set(), {}
        for i in range(0, len(files), 500):  # SQLite's limit on bound values was 999 before 3.32
            chunk, marks = files[i:i + 500], ",".join("?" * len(files[i:i + 500]))
            kept.update(f for (f,) in conn.execute(f"SELECT DISTINCT file FROM units WHERE file IN ({marks})", chunk))
            sizes.update(conn.execute(f"SELECT file, bytes FROM files WHERE file IN ({marks})", chunk))
        gone = [f for f in files if f not in kept]
        conn.executemany("DELETE FROM files WHERE file = ?", [(f,) for f in gone])
    size = 0
    for file in gone:
        with contextlib.suppress(OSError):
            size += sizes.get(file) or (data / file).stat().st_size
            (data / file).unlink()
    return {"units": units, "calls": calls, "files": len(gone), "bytes": size}


def remove_unfinished(data: Path) -> tuple[int, int]:
    """Remove the ``.tmp`` files a ``put`` killed outright left in ``data`` (its Arrow file before the rename),
    once unchanged for ``stale_writes.GRACE_S`` (a live ``put`` writes its file in seconds); returns how many and
    their bytes."""
    from operators.stale_writes import abandoned

    count = size = 0
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):  # no data folder (a file there): none stored
        for entry in os.scandir(data):
            if entry.is_file(follow_symlinks=False) and entry.name.endswith(".tmp"):
                with contextlib.suppress(FileNotFoundError):
                    bytes_ = entry.stat(follow_symlinks=False).st_size
                    if abandoned(Path(entry.path), remove_it=True):
                        count, size = count + 1, size + bytes_
    return count, size
