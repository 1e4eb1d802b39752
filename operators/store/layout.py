"""An index directory on disk: its parts' names, the single-writer lock, the manifest file.

Everything that touches the manifest goes through here: it is read whole, validated,
and replaced atomically under ``file_lock``, so readers in any process see one
generation or the next, and writers in different processes take turns.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import time
import uuid
from pathlib import Path

from pydantic import ValidationError

from operators.atomic import replaced_by, write_bytes
from operators.errors import short_repr
from operators.home import tessera_home
from operators.path_access import unreachable, windows_path
from operators.store.errors import IndexCorruptError, IndexNotFoundError, IndexStoreError, ManifestLostError, \
    UnfinishedFirstIngestError
from operators.store.lock_wait import notice_if_waiting
from operators.store.settings import FORMATS, Manifest
from operators.store.upgrade import STAGING_DIR, STATE_FILE, staged_sources, upgraded

MANIFEST, LOCK, SHARDS = "manifest.json", ".lock", "shards"
#: ``$TESSERA_HOME/indices/auto``: where ``tessera bench`` builds the indices a flow needs (flows.bench.indices).
BENCH_FOLDER = "auto"


#: The index ``make demo`` builds in a clone, in the working folder: what ``tessera chat`` and ``tessera serve`` read
#: when no index is named.
DEMO_INDEX = ".tessera/indices/sample"
#: The same index made outside a clone: ``tessera ingest --source FILE --index sample``, in ``$TESSERA_HOME``.
SAMPLE_NAME = "sample"


def default_index() -> str:
    """The index read when none is named: ``make demo``'s in the working folder, else ``$TESSERA_HOME``'s ``sample``
    when it is there (a user of an installed wheel makes it with ``tessera ingest --index sample`` from any folder,
    and the working folder's was looked for in vain); ``DEMO_INDEX`` when neither is, for the message to name."""
    home_sample = resolve_index(SAMPLE_NAME)
    if not (Path(DEMO_INDEX) / MANIFEST).is_file() and (home_sample / MANIFEST).is_file():
        return str(home_sample)
    return DEMO_INDEX


def resolve_index(name_or_path: str | os.PathLike) -> Path:
    """``$TESSERA_HOME/indices/<name>`` for a bare name, else the path as given, made absolute.

    A bare name is text with no path separator: ``./idx`` and ``idx/`` are paths (the text is read, not the parts),
    and so is any ``pathlib.Path``, which has dropped the ``./`` and the slash: ``Path("./idx")`` meant ``./idx``, not
    ``$TESSERA_HOME``'s ``idx``. A folder that happens to have the
    name in the working directory is not the index: which index a name means must not depend on
    where the command runs (``./idx`` says that one). Absolute, because ``Path("./idx")`` is
    ``idx``: an index opened again from its ``path`` would otherwise be ``$TESSERA_HOME``'s. An empty
    name is refused: it would be ``$TESSERA_HOME/indices`` itself, the folder of every named index; so is a name
    with a control character (a pasted newline or escape: a folder no listing shows as typed). Anything but
    text or a path (None, a number, a list) is refused naming what it got, not with ``os.fspath``'s TypeError."""
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise IndexStoreError(f"an index is a name or a path (str or pathlib.Path), got {type(name_or_path).__name__} "
                              f"{short_repr(name_or_path)}")
    if not os.fspath(name_or_path).strip():
        raise IndexStoreError(f"an index name cannot be empty, got {os.fspath(name_or_path)!r}: give a name or a "
                              "path")
    if is_index_name(name_or_path):
        if any(ord(char) < 32 or ord(char) == 127 for char in str(name_or_path)):  # made a folder 'a<newline>b', and
            # an ESC in it went to the terminal in the line that named the index
            raise IndexStoreError(f"an index name cannot hold control characters (a newline, a tab, an escape), got "
                                  f"{str(name_or_path)!r}: give a name of letters, digits, '_', '.' or '-'")
        named = tessera_home() / "indices" / str(name_or_path)
        if (windows := windows_path(str(name_or_path))) is not None and not named.exists():  # C:\idx was a name:
            # tessera ingest made $TESSERA_HOME/indices/'C:\idx', and a search looked for it there
            raise IndexStoreError(f"the index '{name_or_path}' is {windows}, or a name of letters, digits, '_', "
                                  "'.' or '-'")
        return named
    return expand_user(name_or_path).absolute()


def expand_user(path: str | os.PathLike) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded; a user this machine does not know is refused in one
    line (``Path.expanduser`` raises a bare ``RuntimeError``)."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        user = os.fspath(path).split(os.sep, 1)[0]
        raise IndexStoreError(f"{os.fspath(path)}: {user} names no user's home folder on this machine (a path "
                              "that starts with ~ is in a home folder): give another path") from None


def is_index_name(name_or_path: str | os.PathLike) -> bool:
    """Whether ``resolve_index`` reads it as a name under ``$TESSERA_HOME/indices`` (text with no path separator, not
    ``.``, ``..`` or ``~...``), not as a path. A ``pathlib.Path`` is always a path: its text has lost a ``./``."""
    if not isinstance(name_or_path, str):
        return False
    text = name_or_path
    separators = (os.sep, os.altsep) if os.altsep else (os.sep,)
    return not (text.startswith("~") or Path(text).is_absolute() or any(sep in text for sep in separators)
                or text in (".", ".."))


def not_a_folder(path: Path) -> str | None:
    """Why ``path`` cannot be an index folder, or None: it is a file (a corpus given as the index, most likely, or
    the manifest itself), or lies under one."""
    if os.path.isfile(path):
        if path.name == MANIFEST:
            return f"{path} is an index's manifest, not the index: give its folder {path.parent}"
        return (f"{path} is a file, not an index folder; to index it: `tessera ingest --source "
                f"{shlex.quote(str(path))} --index NAME` (in Python: flows.api.ingest({str(path)!r}, NAME))")
    for parent in path.parents:  # the nearest one that exists: a file, or a device (TESSERA_HOME=/dev/null)
        if os.path.exists(parent):
            return None if os.path.isdir(parent) else f"{path} is under the file {parent}, not in a folder"
    return None


def check_new_index_path(path: Path) -> None:
    """Refuse to write an index at ``path`` (before anything is read or embedded) where that would fail or harm:
    a file, or under one; the folder ``tessera bench`` builds its indices in (the name ``auto``); a folder whose
    manifest is lost but whose shards are there: a new manifest would make them folders no commit records, which
    a compaction deletes an hour later; a path this user may not reach (it was an internal PermissionError)."""
    if (why := unreachable(path)) is not None:
        raise IndexStoreError(f"cannot make or add to an index at {path}: {why}")
    if (why := not_a_folder(path)) is not None:
        raise IndexStoreError(why)
    bench = tessera_home() / "indices" / BENCH_FOLDER
    if path.resolve() == bench.resolve():
        raise IndexStoreError(f"{path} is the folder `tessera bench` builds its indices in (the index name "
                              f"{BENCH_FOLDER!r} is taken): give another name or path")
    if (lost := lost_manifest(path)) is not None:
        raise IndexCorruptError(f"{lost}: restore the manifest, or give another path; nothing was written")


#: What Tessera writes in an index folder, also before its first manifest (an interrupted first ingestion): the
#: ingestion's staging and failure ledger (flows.ingestion.ledger), the ColBERT token store (token_store.STORE_DIR),
#: the service's record of who made the index (serve/indices/index_owner.py's ``owner.json``, written before the
#: upload's ingestion starts), writers' ``.tmp-*`` folders, and one of these files being replaced (the first manifest
#: being written: ``.manifest.json.<pid>.<random>.tmp``, ``operators.atomic.replaced_by``). Any other name in a folder
#: without a manifest is someone else's.
INDEX_ENTRIES = frozenset({MANIFEST, LOCK, SHARDS, STAGING_DIR, "failures.jsonl", "colbert", "owner.json"})


def foreign_entries(path: Path) -> list[str]:
    """The names in the folder ``path`` that are no index's, sorted: a folder of other files, where a new index would
    be written among them. Empty for an index (it has a manifest), an empty folder, or none there."""
    if not path.is_dir() or (path / MANIFEST).exists():
        return []
    return sorted(entry.name for entry in path.iterdir()
                  if entry.name not in INDEX_ENTRIES and replaced_by(entry.name) not in INDEX_ENTRIES
                  and not entry.name.startswith(".tmp-"))


def check_not_foreign(path: Path) -> None:
    """Refuse to write a new index among someone's files (``foreign_entries``): ``tessera ingest`` and ``tessera
    index add`` both check it before anything is read or embedded. An empty folder and an index pass."""
    if others := foreign_entries(path):
        raise IndexStoreError(f"{path} is a folder of other files, not an index ({entries_named(others)}): give a "
                              f"new or empty folder for the index, e.g. {path / 'index'}")


def entries_named(others: list[str]) -> str:
    """``2 entries: a.txt, b.md`` (the first five, then how many more): a folder of other files named in words that
    read right for one entry too, as ``tessera index info`` and ``tessera ingest`` refuse it alike."""
    shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
    return f"{len(others)} entr{'y' if len(others) == 1 else 'ies'}: {shown}"


def check_index_exists(name_or_path: str | os.PathLike) -> Path:
    """The folder of the index ``name_or_path`` names, refused as ``Index.open`` refuses it (an
    ``IndexNotFoundError`` naming ``tessera ingest`` where there is no manifest) without loading it: a flow given
    a missing index is refused when it is loaded, not at its first search. The error names its field, ``index``
    (a flow's ``index=``, the command line's ``--index``), as other bad arguments are named."""
    try:
        path = resolve_index(name_or_path)
        read_manifest(path)
    except IndexStoreError as err:
        err.field = err.field or "index"
        raise
    return path


def lost_manifest(path: Path) -> str | None:
    """``'PATH holds N shard folder(s) but no manifest.json (e.g. shards/ID)'`` where the folder has no manifest
    but shards that some commit recorded (``committed_looking_shards``): an index whose manifest is lost, which
    neither a new index nor a reader should take for an empty folder; else None."""
    if (path / MANIFEST).exists() or not (orphans := committed_looking_shards(path)):
        return None
    return f"{path} holds {len(orphans)} shard folder(s) but no {MANIFEST} (e.g. {SHARDS}/{orphans[0]})"


def committed_looking_shards(path: Path) -> list[str]:
    """The finished shard folders under ``shards/`` that no unfinished ingestion still stages (``_ingest/<key>/
    <shard>.parquet``, whose shards a crashed first ingestion may have written before its first commit): without
    a manifest, shards that some commit recorded."""
    folder = path / SHARDS
    if not folder.is_dir():
        return []
    staged = {p.name.removesuffix(".parquet") for p in (path / STAGING_DIR).glob("*/*.parquet")}
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")
                  and p.name not in staged)


def unfinished_first_ingest(path: Path) -> tuple[Path, str | None] | None:
    """The staging folder and source (None where the plan names none) of the first ingestion into ``path``, a folder
    without a manifest whose ``_ingest/`` stages a source: interrupted (or still running) before its first commit;
    else None. Such a folder was told to "build one with tessera ingest --source FILE", as if nothing had been
    done. Not for an index the service makes (``owner.json``): its uploads are ingested by the service, not by a
    command."""
    if (path / "owner.json").exists():
        return None
    for folder in staged_sources(path):
        try:
            params = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))["params"]
            return folder, params.get("path") or params.get("folder")
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            continue  # staging was cut short before its plan was written: the next ingest starts it again
    return None


def new_shard_id(kind: str) -> str:
    """``add-20261207234500-1f2e3d4c``: the time in UTC. In the machine's own zone, unnamed, one index's shards
    said times of other zones when written from other machines, and an hour that went back at a DST change."""
    return f"{kind}-{time.strftime('%Y%m%d%H%M%S', time.gmtime())}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def file_lock(path: Path):
    """The index's single-writer lock (fcntl.flock on ``.lock``), across processes and threads. A wait of more than
    a moment is said, naming the holder (``lock_wait``)."""
    fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with notice_if_waiting(path, path / LOCK):
                fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_manifest(path: Path) -> Manifest:
    """The manifest of the index at ``path``, at this release's format (an earlier one is upgraded in memory,
    ``upgrade.upgraded``; the next write writes it so). A later format is refused: this release would drop what
    it records. A folder with shards but no manifest is a ``ManifestLostError`` that says so (``lost_manifest``)."""
    file = path / MANIFEST
    try:
        file.is_file()
    except PermissionError:  # a folder this user may not enter on the way: said, not an internal error
        raise IndexStoreError(f"cannot open the index at {path}: {unreachable(path) or 'permission denied'}") from None
    if path.is_file():  # a corpus file given as the index, most likely, or the manifest itself
        raise IndexNotFoundError(not_a_folder(path))
    if not file.is_file():
        if (lost := lost_manifest(path)) is not None:  # not "build one": an ingestion there is refused
            raise ManifestLostError(f"{lost}: restore the manifest to open it")
        if (under := not_a_folder(path)) is not None:  # $TESSERA_HOME or its indices/ a file: said, not "build one"
            raise IndexNotFoundError(f"no index at {path}: {under}")
        if others := foreign_entries(path):  # a folder of documents given as the index: ingest it, elsewhere
            raise IndexNotFoundError(f"no index at {path}: it is a folder of other files ({entries_named(others)}; "
                                     f"no {MANIFEST}); to index them: `tessera ingest --source "
                                     f"{shlex.quote(str(path))} --index NAME`")
        if (first := unfinished_first_ingest(path)) is not None:  # not "build one": one was begun, and resumes
            raise UnfinishedFirstIngestError(path, *first)
        hint = "" if path.exists() else " (the directory does not exist)"
        if not path.exists() and path.parent == tessera_home() / "indices" and (Path(path.name) / MANIFEST).is_file():
            hint += (f"; ./{path.name} here is an index: a bare name is looked up under $TESSERA_HOME/indices, so "
                     f"give it as ./{path.name}")  # ingested as --index ./NAME, searched as --index NAME
            raise IndexNotFoundError(f"no index at {path}: {file} not found{hint}")
        named = not path.exists() and path.parent == tessera_home() / "indices"  # a name: maybe one mistyped
        listed = "; `tessera index list` lists the indices there" if named else ""
        raise IndexNotFoundError(f"no index at {path}: {file} not found{hint}; build one with `tessera ingest "
                                 f"--source FILE --index {shlex.quote(str(path))}` (in Python: "
                                 f"flows.api.ingest(FILE, {str(path)!r})){listed}")
    try:
        raw = _read_json(file)
    except FileNotFoundError:  # replaced between the check and the read
        try:
            raw = _read_json(file)
        except FileNotFoundError:  # gone, not replaced: the index was deleted (moved aside) meanwhile
            raise IndexNotFoundError(f"no index at {path}: {file} went while it was read") from None
    if isinstance(raw, dict) and raw.get("format") not in (None, *FORMATS):
        found = raw.get("format")
        later = isinstance(found, int) and found > max(FORMATS)
        raise IndexCorruptError(f"{file}: format {found!r} is not supported (this Tessera reads "
                                f"{' and '.join(map(str, FORMATS))}{'; a later Tessera wrote it' if later else ''})"
                                f"{': upgrade Tessera to use this index' if later else ''}")
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        raise IndexCorruptError(f"{file}: {first['msg']} at {'.'.join(map(str, first['loc']))}") from None
    return upgraded(path, raw, manifest)


def stored_format(path: Path) -> int:
    """The format of the index's manifest as stored (``read_manifest`` gives this release's): what an earlier release
    can still read until the next write."""
    return _read_json(path / MANIFEST).get("format") or 1


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise IndexCorruptError(f"unreadable manifest {path}: {err}") from None


def write_manifest(path: Path, manifest: Manifest) -> None:
    write_bytes(path / MANIFEST, manifest.model_dump_json(indent=1).encode("utf-8"))
