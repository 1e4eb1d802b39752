"""Who owns an index the service made, kept in the index's own folder as well as in the task store.

The task store's ``indices`` row says who owns an index and whether it is shared, and an index
without a row is one the service did not make (the default index, one ``tessera ingest``
built), which every key may search. So a store that loses its rows (a new or reset
``tasks.db``, a move to another database) would make every uploaded index readable by every
key. The service therefore also writes ``<index>/owner.json`` when it makes an index
(``{"owner", "shared", "spec", "created"}``; written atomically, kept in step with
``PATCH /v1/indices/{name}``). An index folder with that file and no row is private to the
owner it names (shared only when the file says so), and its row is put back from the file
the next time the service starts (``restore_rows``) or its owner changes it. A file that
cannot be read makes the index readable by nobody: it fails closed.

An index the service made is born when its manifest records a commit (``born``), not when the manifest exists:
``Index.create`` writes an empty one as the first upload's ingestion starts. Until then a search naming it gets a 409
``index_empty``, and a first upload that fails or is cancelled removes it (``serve.tasks.ingest_task``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from serve.http.errors import NOT_OWNED, ApiError

log = logging.getLogger("tessera.serve")

#: The file in an index folder that names the key that made it through the service.
OWNER_FILE = "owner.json"
#: The owner of an index whose owner file cannot be read: no key has this id (ids start with a letter or digit).
NOBODY = "-unreadable-owner-file-"
#: Why no key may change an index, after "index '<name>' ", as the 403 ``index_read_only`` of a change says it and
#: ``GET /v1/indices`` lists it (``read_only_names``): the default index (its name also before it is built), and an
#: index the service did not make (one ``tessera ingest`` built in its folder).
DEFAULT_READ_ONLY = ("is the service's default index, which every key searches; it is read-only here (build it with "
                     "`tessera ingest`)")
NOT_MADE_HERE = ("was not made through this service; it is read-only here (change it with `tessera index` or "
                 "`tessera ingest`)")


def write_owner(folder: Path, row: dict[str, Any]) -> None:
    """Write ``folder/owner.json`` from an ``indices`` row (owner, shared, spec, created), atomically: a reader sees
    the old file or the new one, never half of one."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {"owner": row["owner"], "shared": bool(row["shared"]), "spec": row["spec"],
              "created": float(row["created"])}
    # named as a writer's temporary file (``.tmp-*``), which an index folder may hold: named ``.owner.json.*``, a second
    # upload creating the same index at that moment was refused as writing "a folder of other files"
    fd, tmp = tempfile.mkstemp(prefix=f".tmp-{OWNER_FILE}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(record, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, folder / OWNER_FILE)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class OwnerFile:
    """The owner file an upload writes for ``tenant``'s index in ``folder``, inside the transaction that queues its
    ingestion (``TaskStore.create_ingest_task``'s ``on_row``): a new index, or one made before owner files. Written
    after the task was queued, a refused write answered the client 507 ("nothing of this request was stored") while
    its task was queued and the index made; now a refused write rolls the queueing back, and a queueing that fails
    after the file was written (its commit refused) takes the file, and the folder it made, away again."""

    def __init__(self, folder: Path, tenant: str) -> None:
        self.folder, self.tenant = folder, tenant
        self.made_folder = not folder.exists()
        self.written = False

    def write(self, row: dict[str, Any]) -> None:
        if row["owner"] == self.tenant and not (self.folder / OWNER_FILE).exists():
            write_owner(self.folder, row)
            self.written = True

    @contextlib.contextmanager
    def undone_unless_queued(self) -> Iterator[None]:
        try:
            yield
        except BaseException:
            self.undo()
            raise

    def undo(self) -> None:
        """Take back what ``write`` wrote (the file; the folder if it made it and it is empty now)."""
        if self.written:
            (self.folder / OWNER_FILE).unlink(missing_ok=True)
        if self.made_folder:
            with contextlib.suppress(OSError):  # not empty: another upload's files are in it now
                self.folder.rmdir()


def read_owner(folder: Path) -> dict[str, Any] | None:
    """The ``indices`` row that ``folder/owner.json`` stands for (``ingest_task`` None); None when the folder has no
    such file. A file that cannot be read gives an owner no key has, not shared."""
    path = folder / OWNER_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        row = {"name": folder.name, "owner": str(record["owner"]), "shared": record["shared"] is True,
               "spec": str(record.get("spec") or "ingest"), "created": float(record.get("created") or time.time()),
               "ingest_task": None}
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as err:
        log.warning("index %s: %s cannot be read (%s); nobody may read the index until it is fixed", folder.name,
                    OWNER_FILE, err)
        return {"name": folder.name, "owner": NOBODY, "shared": False, "spec": "ingest", "created": 0.0,
                "ingest_task": None}
    return row


def restore_rows(store: Any, folder: Path) -> int:
    """At replica start: every index folder under ``folder`` with an owner file and no row gets its row back from the
    file, and every row whose folder lacks the file (an index made before the file was written) gets one. How
    many rows were put back."""
    if not folder.is_dir():
        return 0
    made, restored = store.indices_made(), 0
    for child in sorted(folder.iterdir()):
        if not child.is_dir() or child.name.startswith("."):
            continue
        row = made.get(child.name)
        if row is not None:
            if not (child / OWNER_FILE).exists():
                write_owner(child, row)
            continue
        found = read_owner(child)
        if found is not None and found["owner"] != NOBODY and store.restore_index(found):
            log.warning("index %s: its task store row was missing; restored from %s (owner %s)", child.name,
                        OWNER_FILE, found["owner"])
            restored += 1
    return restored


def default_names(default: str | None) -> tuple[str, ...]:
    """The index names a change is refused for as the default index's (``default``: its path, None: none): its
    folder's name, and that of the folder a link to it leads to, also where it lies outside the service's folder."""
    if not default:
        return ()
    return tuple(dict.fromkeys((Path(default).name, Path(default).resolve().name)))


def adding_refused(folder: Path, roots: list[str]) -> str | None:
    """Why no key may make an index or change one here, else None: the service's folder of indices (``folder``) lies
    outside its index roots (``args.service.index_roots``), so a search could read nothing added to it. The 403
    ``indices_read_only`` of every change, and ``GET /v1/indices``' ``cannot_add``; the folder is not named to the
    client (the service's log at start says it)."""
    from serve.indices.index_roots import under

    if under(folder.resolve(), roots):
        return None
    return ("this service cannot add indices: its folder of indices is outside its index roots "
            "(args.service.index_roots), so no search could read them")


def read_only_names(listed: list[dict[str, Any]], default: str | None) -> dict[str, str]:
    """``GET /v1/indices``' ``read_only``: each index name the caller may know of and not change (add documents to,
    delete documents from, share or delete), with why, in the words of the 403 such a change gets after "index
    '<name>' ": the default index's names (also before it is built, and where it is listed without a name), then
    each listed index (``Indices.listing``) that is not the caller's: another key's shared one, one the service did
    not make (no row: no ``spec``). The web UI turns its deletion off for these (serve/ui/indices.js)."""
    names = dict.fromkeys(default_names(default), DEFAULT_READ_ONLY)
    for entry in listed:
        if entry["name"] and not entry["writable"]:
            names.setdefault(entry["name"], NOT_MADE_HERE if entry["spec"] is None else NOT_OWNED)
    return names


def unshared(name: str, field: str) -> ApiError:
    return ApiError(403, f"{field}: index '{name}' belongs to another key, which has not shared it (its owner "
                    "shares it with PATCH /v1/indices/{name} and {\"shared\": true})", param=field,
                    code="index_not_shared")


def readable(row: dict[str, Any] | None, tenant: str) -> bool:
    """Whether ``tenant`` may search an index: one the service did not make (``row`` None: neither a task store row
    nor an owner file; the default index, one ``tessera ingest`` built), its own, or one its owner shared."""
    return row is None or row["owner"] == tenant or bool(row["shared"])


def index_holding(folder: Path, path: Path) -> Path | None:
    """The index under the service's indices ``folder`` that ``path`` (confined: absolute) is, or is inside of (its
    ``_ingest/``, a shard), else None: a path inside another key's index is refused as the index is, not answered
    with what that folder holds."""
    try:
        inside = path.relative_to(folder.resolve()).parts
    except ValueError:
        return None
    return folder.resolve() / inside[0] if inside else None


def check_named(path: Path, row: dict[str, Any] | None, tenant: str, field: str) -> None:
    """A 403 naming ``field`` for an index ``tenant`` may not read; a 409 for one the service made (``row``) that has
    no documents yet (listed with 0 chunks, but no index for a search to open)."""
    if not readable(row, tenant):
        raise unshared(path.name, field)
    if row is not None and not born_cached(path):
        task = f" (task {row['ingest_task']})" if row["ingest_task"] and row["owner"] == tenant else ""
        raise ApiError(409, f"{field}: index '{path.name}' has no documents yet: no upload into it has committed any"
                       f"{task}; search it once one has (GET /task/progress/{{id}} follows an upload)", param=field,
                       code="index_empty")


def born(path: Path) -> bool:
    """Whether the index folder ``path`` holds a commit: a committed shard (one a compaction merged away counts) or
    any later commit (its documents all deleted). An empty manifest (``Index.create``'s, as a first upload starts) or
    none is not born; a manifest that cannot be read, or a lost one with committed shard folders left
    (``ManifestLostError``), counts as born, so nothing removes that index and a search names the damage."""
    from operators.store.commit_shards import finished
    from operators.store.errors import IndexNotFoundError, IndexStoreError, ManifestLostError
    from operators.store.layout import read_manifest

    try:
        manifest = read_manifest(path)
    except ManifestLostError:
        return True
    except IndexNotFoundError:
        return False
    except (IndexStoreError, OSError):
        return True
    return manifest.generation > 0 or bool(finished(manifest))


def born_cached(path: Path) -> bool:
    """``born``, read again only when the manifest file changed (every commit replaces it): a search checks it
    each time and a big manifest takes a while to parse."""
    from operators.store.layout import MANIFEST

    try:
        stat = (path / MANIFEST).stat()
    except OSError:
        return born(Path(path))  # no manifest yet, or a lost one (a folder listing, not cached)
    return _born_at(str(path), stat.st_ino, stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=1024)
def _born_at(path: str, inode: int, mtime_ns: int, size: int) -> bool:
    return born(Path(path))
