"""The step cache: reuse a step's output for input it has already seen.

Output is stored per *unit* (a row, a ``qid`` group or a whole corpus), under a key made
from the step's identity and the unit's input (``flows.cache_keys``), so the hit ratio
does not depend on how rows were batched across workers.

Storage is a directory: ``index.sqlite`` (WAL mode, so many Ray workers can write
at once; ``INSERT OR IGNORE`` makes a race harmless) maps unit keys to a slice of an
Arrow IPC file under ``data/``. Files are written to a temporary name and renamed,
so a crash leaves at most an unreferenced file, never a half-written entry. A file
damaged later (truncated, removed by hand) is a miss, and its entries are dropped so
the next run stores the recomputed units again. The ``files`` table records each file's
size and last use, so ``prune`` (``flows.cache_prune``) can evict the least recently used.

The directory carries a marker file (``MARKER``), and ``clear`` deletes only what the
cache wrote, in a directory that has the marker: pointed at any other folder it
refuses, so a mistyped ``--cache-dir`` cannot delete someone's work (``flows.cache_folder``).
The database's connections, and the refusals of a folder that cannot hold one, are ``flows.cache_database``'s.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import pyarrow as pa

from flows.cache_code import module_digests
from flows.cache_database import SCHEMA, CacheDatabase, CacheUnwritable, unwritable
from flows.cache_folder import MARKER, is_cache_dir, later_layout, remove_cache_files
from flows.cache_keys import row_unit_keys, step_explain, step_key, table_unit_key
from flows.cache_prune import forget_calls, transaction
from operators.base import Operator
from operators.byte_sizes import format_bytes
from operators.disk_refusal import refusal, refused_by
from operators.errors import CacheError  # defined there for flows.cache_prune; importable from here

#: Keys live in ``flows.cache_keys``, the folder's rules in ``flows.cache_folder``; ``step_key``, ``row_unit_keys``
#: and ``table_unit_key`` stay importable from here for the tests that import them from ``flows.cache``.
__all__ = ["CacheError", "CachedUnit", "StepCache", "TOUCH_EVERY_S", "row_unit_keys", "step_key", "table_unit_key"]

#: A hit marks its file used at most this often (seconds): last-use times for ``prune``, not a write per lookup.
TOUCH_EVERY_S = 60.0


@dataclass
class CachedUnit:
    source: pa.Table | None  # the whole stored file; None when the unit produced no rows
    start: int
    count: int
    meta: dict[str, Any] | None

    @property
    def table(self) -> pa.Table | None:
        return None if self.source is None else self.source.slice(self.start, self.count)


class StepCache(CacheDatabase):
    """A persistent, multi-process cache of step outputs by unit key."""

    def __init__(self, root: str | Path | None = None):
        from flows.store import default_cache_dir  # $TESSERA_HOME now, not when this module was imported

        # ~ as a shell reads it (Flow.run's cache= and --cache-dir do): Path("~/steps") made a folder named "~"
        self.root = Path(os.path.expanduser(root)) if root else default_cache_dir()
        self._local = threading.local()
        self._touched: dict[str, float] = {}  # when this process last marked a file used
        self.begin_run()

    def __reduce__(self):  # ship to Ray workers by path (connections are per process), with why it stores nothing
        return (StepCache, (str(self.root),), {"off": self._off or None})

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a worker neither asks nor says again why the run stores nothing; where the driver may write, it asks itself
        self._off = state["off"]

    def __repr__(self) -> str:
        """One line naming the folder, as ``StepCache(path)`` makes it; a stat, not the database (a repr creates
        nothing): ``StepCache('/home/me/.tessera/cache')``, with ``: not created yet`` before the first run."""
        made = (self.root / "index.sqlite").is_file()
        return f"StepCache({str(self.root)!r}{'' if made else ': not created yet'})"

    def check(self) -> None:
        """Fail now, naming the path, if this cache cannot be opened (before a run computes anything). A cache this
        process may not write (``read_only``) or whose files the disk refuses to make (full, a file size limit) is
        said once, and the run goes on reading what is stored there and storing nothing."""
        if self.read_only():
            self._refuse_later_layout()
            return
        with self._or_said():
            self._conn()

    # -- units ----------------------------------------------------------------

    def get(self, keys: Iterable[bytes]) -> dict[bytes, CachedUnit]:
        """Cached units among ``keys``; also where this run stores nothing (``read_only``: a read-only folder, a full
        disk), which reads them without writing."""
        keys = list(dict.fromkeys(keys))
        if not self.read_only():
            try:
                return self._units(self._conn(), keys)
            except CacheUnwritable as err:  # a full disk would not let the database be made or opened
                self._unwritable(err)
        with self._stored_reader() as conn:
            try:
                return {} if conn is None else self._units(conn, keys)
            except sqlite3.DatabaseError as err:  # a read a writer beside it tore: misses, computed
                self.cannot_read(err)
                return {}

    def _units(self, conn: sqlite3.Connection, keys: list[bytes]) -> dict[bytes, CachedUnit]:
        found: dict[bytes, tuple[str | None, int, int, str | None]] = {}
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            marks = ",".join("?" * len(chunk))
            for key, file, start, count, meta in conn.execute(
                f"SELECT key, file, start, count, meta FROM units WHERE key IN ({marks})", chunk
            ):
                found[key] = (file, start, count, meta)
        tables: dict[str, pa.Table] = {}
        broken: set[str] = set()
        result: dict[bytes, CachedUnit] = {}
        for key, (file, start, count, meta) in found.items():
            source = None
            if file:
                if file not in tables and file not in broken:
                    try:
                        # closed here, not when the last reference goes: pyarrow's I/O threads can hold the file a
                        # moment after read_all returns. The rows stay readable (the mapping lives with them)
                        with pa.memory_map(str(self.root / "data" / file)) as source:
                            tables[file] = pa.ipc.open_file(source).read_all()
                    except (OSError, pa.ArrowInvalid):
                        broken.add(file)  # removed or damaged: a miss
                if file in broken:
                    continue
                source = tables[file]
            result[key] = CachedUnit(source, start, count, json.loads(meta) if meta else None)
        if broken:
            self._forget(broken)
        if tables:
            self._touch(list(tables))
        return result

    def _touch(self, files: list[str]) -> None:
        """Mark ``files`` used now (for ``prune``'s least-recently-used order); a file marked within the last
        ``TOUCH_EVERY_S`` is left as it is, so a run of hits costs one small write a minute per file."""
        now = time.time()
        files = [f for f in files if self._touched.get(f, 0) < now - TOUCH_EVERY_S]  # no write for a fresh mark
        if not files or self.read_only():
            return
        self._touched.update(dict.fromkeys(files, now))
        with self._or_said():
            conn = self._conn()
            for i in range(0, len(files), 500):
                chunk = files[i:i + 500]
                conn.execute(f"UPDATE files SET used = ? WHERE used < ? AND file IN ({','.join('?' * len(chunk))})",
                             [now, now - TOUCH_EVERY_S, *chunk])

    def _forget(self, files: set[str]) -> None:
        """Drop the entries of damaged files, so the units are stored again when they are recomputed (by a run that
        may write: one that may not leaves them, and their files, as they are)."""
        if self.read_only():
            return
        with self._or_said(), transaction(self._conn()) as conn:
            conn.executemany("DELETE FROM units WHERE file = ?", [(f,) for f in files])
        for file in files:
            with contextlib.suppress(OSError):
                (self.root / "data" / file).unlink()

    def put(self, units: Sequence[tuple[bytes, pa.Table | None, dict[str, Any] | None]]) -> None:
        """Store units: ``(key, rows or None, metadata)``; rows of all units share one file."""
        if not units or self.read_only():
            return
        tables = [t for _, t, _ in units if t is not None and t.num_rows]
        file, size = None, 0
        if tables:
            data = pa.concat_tables(tables, promote_options="permissive")
            file = f"{uuid.uuid4().hex}.arrow"
            path = self.root / "data" / file
            tmp = path.with_suffix(".tmp")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, data.schema) as writer:
                    writer.write_table(data)
                os.replace(tmp, path)
                size = path.stat().st_size
            except OSError as err:  # a full disk, a file size limit: the run's results stand, uncached
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
                self._unwritable(err)
                return
        rows, offset = [], 0
        for key, table, meta in units:
            count = table.num_rows if table is not None else 0
            rows.append((key, file if count else None, offset, count, json.dumps(meta) if meta else None))
            offset += count
        kept = False
        with self._or_said(), transaction(self._conn()) as conn:
            conn.executemany("INSERT OR IGNORE INTO units VALUES (?, ?, ?, ?, ?)", rows)
            # a run beside this one stored these units first: the file then backs none, and would take space for ever
            kept = file is not None and conn.execute("SELECT 1 FROM units WHERE file = ? LIMIT 1", (file,)).fetchone()
            if kept:
                conn.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?)", (file, size, time.time()))
        if file and not kept:
            (self.root / "data" / file).unlink(missing_ok=True)

    @contextlib.contextmanager
    def _or_said(self) -> Iterator[None]:
        """A write the disk refuses (``refused_by``; the database it would not let be made) is said once and left
        out: the run goes on."""
        try:
            yield
        except CacheUnwritable as err:
            self._unwritable(err)
        except sqlite3.OperationalError as err:
            if not refused_by(err):
                raise
            self._unwritable(err)

    def _unwritable(self, err: OSError | sqlite3.Error | CacheUnwritable) -> None:
        """The disk refused a write (full, a file size limit): the run stores nothing more, says so once, and goes on
        with what it computed and the hits it reads (a cache only saves work), where it stopped with pyarrow's bare
        ``OSError`` as an internal error, and then read nothing where the database could not be opened."""
        said = refusal(err)
        if said is None:  # SQLite's own words ("disk I/O error": no room for its -shm file): and how much room is left
            said = f"the disk refused a write: {getattr(err, 'strerror', None) or err}"
            with contextlib.suppress(OSError):
                said += f", {format_bytes(shutil.disk_usage(self.root).free)} free there"
        self.stop_storing(said, "free space there, or run with --no-cache")

    def drop(self, keys: Iterable[bytes]) -> None:
        """Forget the entries of ``keys`` that store no rows (a batch's call records, ``flows.cache_calls``)."""
        keys = list(keys)
        if keys and not self.read_only():
            with self._or_said():
                forget_calls(self._conn(), keys)

    # -- explanations -----------------------------------------------------------

    def record_step(self, flow: str, step: str, op: Operator, stats: dict[str, Any]) -> None:
        if self.read_only():
            return
        explained = step_explain(op)
        explain = {**explained, "step_key": step_key(op, explained), "last_run": stats,
                   "module_digests": module_digests(op)}  # beside the key: which module an edit changed
        with self._or_said():
            self._conn().execute("INSERT OR REPLACE INTO steps VALUES (?, ?, ?, ?, ?)",
                                 (flow, step, explain["step_key"], json.dumps(explain, default=str), time.time()))

    def explain(self, flow: str, step: str | None = None) -> list[dict[str, Any]]:
        query = "SELECT step, explain FROM steps WHERE flow = ?"
        args: list[Any] = [flow]
        if step:
            query += " AND step = ?"
            args.append(step)
        with self._said_of_home(), self._reading() as conn:
            rows = [] if conn is None else conn.execute(query + " ORDER BY updated", args).fetchall()
        return [{"step": s, **json.loads(e)} for s, e in rows]

    def summary(self) -> dict[str, Any] | None:
        """What the cache holds (``flows.cache_prune.summary``); None where no cache is (a run makes it). A folder
        that is not a step cache is refused with a ``CacheError``, as ``prune`` refuses it."""
        from flows.cache_prune import summary

        if not self.root.exists():
            return None
        if not self.root.is_dir() or not is_cache_dir(self.root):
            raise CacheError(f"{self.root} is not a Tessera step cache (no {MARKER})", field="cache_dir")
        with self._said_of_home(), self._reading() as conn, contextlib.closing(sqlite3.connect(":memory:")) as empty:
            if conn is None:  # the marker alone: nothing stored yet
                empty.executescript(SCHEMA)
            return summary(conn or empty, self.root / "data")

    def prune(self, *, max_bytes: int | str | None = None, older_than_s: float | None = None) -> dict[str, int]:
        """Evict stored outputs: every file unused for ``older_than_s`` seconds, then the least recently used
        until the stored outputs hold at most ``max_bytes``; their units go with them (a later run recomputes
        them). With an age, also the model calls an unfinished batch saved longer ago (``calls``). Returns what
        was removed and what is left (``flows.cache_prune``), the same keys with no cache there."""
        from flows.cache_prune import nothing_pruned, prune

        if not self.root.exists():
            return nothing_pruned(max_bytes, older_than_s)  # checked first: a bad bound is refused with no cache too
        if not self.root.is_dir() or not is_cache_dir(self.root):
            raise CacheError(f"refusing to prune {self.root}: it is not a Tessera step cache (no {MARKER})",
                             field="cache_dir")
        if why := unwritable(self.root):
            raise CacheError(f"cannot prune {self.root}: it cannot be written ({why}); nothing was removed",
                             field="cache_dir")
        try:
            conn = self._conn()
        except CacheUnwritable:  # no room for SQLite to open it (its -shm file): the files alone, freeing the disk
            conn = None
        return prune(conn, self.root / "data", max_bytes=max_bytes, older_than_s=older_than_s)

    def clear(self) -> bool:
        """Delete what the cache wrote (never another file, never through a link); False if there was
        no cache. A folder that is not a step cache is refused with a ``CacheError``."""
        if not self._may_delete():
            return False
        self.close()
        remove_cache_files(self.root)
        return True

    def clear_operator(self, name: str) -> dict[str, Any]:
        """Delete the stored outputs of the operator ``name`` (an alias names it too), of every step, params and
        version of it, and keep the rest: for what its key cannot see (a model file replaced at the same path, a
        plugin's data file edited). Returns the operator's registered name (``operator``) and the units, saved model
        calls, files and bytes removed. A name that no
        operator has and the cache never stored is a ``CacheError`` naming the close ones."""
        from flows.cache_keys import operator_tag
        from flows.cache_prune import forget_prefix

        recorded = self.recorded_operators()
        if name not in recorded:
            name = _operator_name(name, recorded)
        if not self._may_delete():
            return {"operator": name, "units": 0, "calls": 0, "files": 0, "bytes": 0}
        with self._said_of_home():
            return {"operator": name, **forget_prefix(self._conn(), self.root / "data", operator_tag(name))}

    def recorded_operators(self) -> list[str]:
        """The operators whose steps the cache recorded a run of (``record_step``), sorted."""
        from flows.cache_prune import recorded_operators

        with self._said_of_home(), self._reading() as conn:
            return [] if conn is None else recorded_operators(conn)

    def _may_delete(self) -> bool:
        """Whether there is a cache to delete from (False: none there); a folder that is not a step cache, one of a
        later release's layout or one that cannot be written is refused with a ``CacheError``."""
        root = self.root
        if not root.exists():
            return False
        if not root.is_dir() or not is_cache_dir(root):
            raise CacheError(f"refusing to clear {root}: it is not a Tessera step cache (no {MARKER}); "
                             "nothing was deleted", field="cache_dir")
        if refused := later_layout(root):  # its files are not this release's to know: the one that wrote it clears it
            raise CacheError(f"refusing to clear {root}: {refused}; nothing was deleted", field="cache_dir")
        if why := unwritable(root):  # a read-only home: an OSError half-way, as an internal error
            raise CacheError(f"cannot clear {root}: it cannot be written ({why}); nothing was deleted",
                             field="cache_dir")
        return True


def _operator_name(name: str, recorded: list[str]) -> str:
    """The registered name of the operator ``name`` (an alias's operator); one neither registered nor ``recorded``
    in the cache is a ``CacheError`` with the close names of both."""
    from operators.error_text import close_names, did_you_mean
    from operators.errors import UnknownOperatorError
    from operators.registry import all_operators, get_operator

    try:
        return get_operator(name).name
    except UnknownOperatorError:
        close = close_names(name, {*recorded, *all_operators()})
        held = f"; the cache holds outputs of {', '.join(recorded)}" if recorded else "; the cache holds no step's"
        raise CacheError(f"no operator '{name}'{'; ' + did_you_mean(close) if close else ''}{held}",
                         field="operator") from None
