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
import time
import uuid
from pathlib import Path

from pydantic import ValidationError

from operators.atomic import write_bytes
from operators.home import tessera_home
from operators.store.errors import IndexCorruptError, IndexNotFoundError
from operators.store.settings import FORMATS, Manifest
from operators.store.upgrade import upgraded

MANIFEST, LOCK, SHARDS = "manifest.json", ".lock", "shards"


def resolve_index(name_or_path: str | os.PathLike) -> Path:
    """``$TESSERA_HOME/indices/<name>`` for a bare name, else the path as given, made absolute.

    A bare name has no path separator: ``./idx`` and ``idx/`` are paths (``Path`` drops the
    ``./`` and the slash, so the text is read, not the parts). A folder that happens to have the
    name in the working directory is not the index: which index a name means must not depend on
    where the command runs (``./idx`` says that one). Absolute, because ``Path("./idx")`` is
    ``idx``: an index opened again from its ``path`` would otherwise be ``$TESSERA_HOME``'s."""
    if is_index_name(name_or_path):
        return tessera_home() / "indices" / str(name_or_path)
    return Path(name_or_path).expanduser().absolute()


def is_index_name(name_or_path: str | os.PathLike) -> bool:
    """Whether ``resolve_index`` reads it as a name under ``$TESSERA_HOME/indices`` (no path separator, not ``.``,
    ``..`` or ``~...``), not as a path."""
    text = os.fspath(name_or_path)
    separators = (os.sep, os.altsep) if os.altsep else (os.sep,)
    return not (Path(text).expanduser().is_absolute() or any(sep in text for sep in separators)
                or text in (".", "..") or text.startswith("~"))


def new_shard_id(kind: str) -> str:
    return f"{kind}-{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:8]}"


@contextlib.contextmanager
def file_lock(path: Path):
    """The index's single-writer lock (fcntl.flock on ``.lock``), across processes and threads."""
    fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_manifest(path: Path) -> Manifest:
    """The manifest of the index at ``path``, at this release's format (an earlier one is upgraded in memory,
    ``upgrade.upgraded``; the next write writes it so). A later format is refused: this release would drop what
    it records."""
    file = path / MANIFEST
    if path.is_file():  # a corpus file given as the index, most likely, or the manifest itself
        if path.name == MANIFEST:
            raise IndexNotFoundError(f"{path} is an index's manifest, not the index: give its folder {path.parent}")
        raise IndexNotFoundError(f"{path} is a file, not an index folder; to index it: `tessera ingest --source "
                                 f"{path} --index NAME` (in Python: flows.api.ingest({str(path)!r}, NAME))")
    if not file.is_file():
        hint = "" if path.exists() else " (the directory does not exist)"
        raise IndexNotFoundError(f"no index at {path}: {file} not found{hint}; build one with `tessera ingest "
                                 f"--source FILE --index {path}` (in Python: flows.api.ingest(FILE, {str(path)!r}))")
    try:
        raw = _read_json(file)
    except FileNotFoundError:  # replaced between the check and the read
        raw = _read_json(file)
    if isinstance(raw, dict) and raw.get("format") not in (None, *FORMATS):
        found = raw.get("format")
        later = "; a later Tessera wrote it" if isinstance(found, int) and found > max(FORMATS) else ""
        raise IndexCorruptError(f"{file}: format {found!r} is not supported (this Tessera reads "
                                f"{' and '.join(map(str, FORMATS))}{later})")
    try:
        manifest = Manifest.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        raise IndexCorruptError(f"{file}: {first['msg']} at {'.'.join(map(str, first['loc']))}") from None
    return upgraded(path, raw, manifest)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        raise IndexCorruptError(f"unreadable manifest {path}: {err}") from None


def write_manifest(path: Path, manifest: Manifest) -> None:
    write_bytes(path / MANIFEST, manifest.model_dump_json(indent=1).encode("utf-8"))
