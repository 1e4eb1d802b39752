"""Where a path an ingestion recorded is now: a source's (``state.json``'s read params) or a read failure's file
(``failures.jsonl``). Both are recorded whole, so a source moved since (a home moved or restored elsewhere, a folder
``mv``-ed and ingested from its new path) left its failures naming files that are not there: ``--retry-failed``
said to put the file back, and the failures stayed open for good.

Two moves are followed, where the recorded path is gone and the path found is there:

* the source moved and was ingested from its new path (``moved`` recognised it): its ``state.json`` keeps the
  paths it was read from before (``moved_from``), and a file under one of them is the same file under the new one;
* the home moved (the index is ``$TESSERA_HOME/indices/NAME``): the topmost folder of the path that is gone is taken
  for the old home, and the path below it is looked for in this home (``serve.tasks.ingest_task.in_this_home`` does
  so for an upload's paths, ``flows.train.prune.in_this_home`` for a model's).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

from flows.ingestion.ledger import Failure

#: ``state.json``'s list of the paths a source was read from before its last one (oldest first).
MOVED_FROM = "moved_from"


def location(params: dict[str, Any] | None) -> str | None:
    """Where a source of these read params is: its path, glob or folder (None when they do not say)."""
    return next((str(params[p]) for p in ("path", "folder") if isinstance((params or {}).get(p), str)), None)


def moved_from(previous: dict[str, Any] | None, params: dict[str, Any]) -> list[str]:
    """The ``moved_from`` of a source now read with ``params`` whose last state was ``previous``."""
    earlier = list((previous or {}).get(MOVED_FROM) or [])
    was, now = location((previous or {}).get("params")), location(params)
    if was and was != now and was not in earlier:
        earlier.append(was)
    return earlier


def in_this_home(path: str, index_path: str | Path) -> str:
    """``path`` in this home, where it is gone and the index is in a home's ``indices/``: the path below its topmost
    folder that is gone (the old home), in the index's home, where that is there; else ``path`` as it is."""
    if "://" in path or os.path.lexists(path):
        return path
    index = Path(os.path.abspath(index_path))
    recorded = Path(os.path.abspath(path))
    if index.parent.name != "indices" or recorded.is_relative_to(index.parent.parent):
        return path
    home = index.parent.parent
    gone = next((p for p in reversed(recorded.parents) if not os.path.lexists(p)), recorded)
    here = home / recorded.relative_to(gone) if gone != recorded else None
    return str(here) if here is not None and os.path.lexists(here) else path


def now_path(recorded: str, state: dict[str, Any] | None, index_path: str | Path) -> str:
    """Where the file ``recorded`` by the source of staging ``state`` (None: unknown) is now: as recorded where it is
    there; else under the source's current path (in this home) at the place it had under a path the source was read
    from; else in this home; else as recorded."""
    if "://" in recorded or not os.path.isabs(recorded) or os.path.lexists(recorded):
        return recorded  # (a relative path, of an older ledger: ``retry.locate`` finds it among the source's files)
    now = location((state or {}).get("params"))
    if now is not None:
        now = in_this_home(now, index_path)
        for was in [location(state.get("params")), *reversed(state.get(MOVED_FROM) or [])]:
            found = _under(recorded, was, now)
            if found is not None and os.path.lexists(found):
                return found
    return in_this_home(recorded, index_path)


def source_now(state: dict[str, Any] | None, index_path: str | Path) -> str | None:
    """The source's path (``location``) as it is now: in this home where it moved with it."""
    where = location((state or {}).get("params"))
    return None if where is None else in_this_home(where, index_path)


def located(params: dict[str, Any], where: str | None) -> dict[str, Any]:
    """The read ``params``' location param (``path`` or ``folder``) set to ``where`` ({} when they have none)."""
    name = next((p for p in ("path", "folder") if isinstance(params.get(p), str)), None)
    return {} if name is None or where is None else {name: where}


def is_there(where: str) -> bool:
    """Whether a source's path is there: its file or folder, a glob's fixed folders (a URL is taken to be)."""
    from operators.sources.paths import glob_stem

    return "://" in where or os.path.lexists(glob_stem(where)[0])


def _under(path: str, was: str | None, now: str) -> str | None:
    """``path`` of a source read from ``was`` as the source read from ``now`` names it: the file itself (a source of
    one file), or the same path below the folder (a folder's, a glob's fixed part)."""
    from operators.sources.paths import glob_stem

    if was is None:
        return None
    if path == was:
        return now
    old, new = glob_stem(was)[0], glob_stem(now)[0]
    if Path(path).is_relative_to(old) and old != Path(path):
        return str(new / Path(path).relative_to(old))
    return None


def ids_here(failures: list[Failure], state: dict[str, Any] | None, params: dict[str, Any]) -> frozenset[str]:
    """The ids of the read ``failures`` of the source of staging ``state``, and the same failures' ids as the source
    read with ``params`` names them, where it was read from elsewhere (moved or copied): staging leaves out the lines
    its finished shards recorded as unreadable, under either name (read under the new one, a fixed line was a
    document in the first shard, which made the moved source another one, refused as live documents)."""
    ids = {f.id for f in failures}
    now = location(params)
    earlier = [was for was in [location((state or {}).get("params")), *reversed((state or {}).get(MOVED_FROM) or [])]
               if was and was != now]
    for failure in failures:
        prefix = f"read:{failure.path}"
        if now is None or not failure.path or not failure.id.startswith(prefix):
            continue
        found = next((p for p in (_under(failure.path, was, now) for was in earlier) if p is not None), None)
        if found is not None:
            ids.add(f"read:{found}{failure.id[len(prefix):]}")
    return frozenset(ids)


def failure_here(index_path: str | Path, resent: str | None = None, params: dict[str, Any] | None = None
                 ) -> Callable[[Failure], str | None]:
    """Where a read failure's file is now (``now_path``, from its source's staging state), for
    ``Ledger.supersede_read_failures``; ``resent``: the staging key of a source whose documents are ingested again
    (``--replace``) from another path, read with ``params``, where its files are found under the same names."""
    from flows.ingestion.staged_files import STAGING_DIR
    from flows.ingestion.unrecorded import source_key_of

    states: dict[str, Any] = {}  # each source's staging state, read once

    def here(failure: Failure) -> str | None:
        key = source_key_of(failure.shard)
        if not failure.path or not key:
            return None
        if key not in states:
            try:
                state_file = Path(index_path) / STAGING_DIR / key / "state.json"
                states[key] = json.loads(state_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                states[key] = None
        state = states[key]
        now = location(params)
        if key == resent and now is not None and isinstance(state, dict):
            moved = _under(failure.path, location(state.get("params")), now)
            if moved is not None:
                return moved
        return now_path(failure.path, state if isinstance(state, dict) else None, index_path)
    return here
