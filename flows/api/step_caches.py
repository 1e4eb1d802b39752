"""The step caches runs of the Python API share: one per folder, the few used last kept open between runs.

Why: ``Flow.run(cache=...)`` opening a database per run left every one open until garbage collection (three open
files per folder, a deleted folder's disk space with them); a process keeps ``KEPT_CACHES`` of them instead.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

from operators.errors import SpecError, short_repr

if TYPE_CHECKING:
    from flows.cache import StepCache

#: The step caches of the folders this process used last, most recent last: at most ``KEPT_CACHES``.
_caches: "OrderedDict[Path, StepCache]" = OrderedDict()
_caches_lock = threading.Lock()
#: How many step caches (each an open database per thread that used it) a process keeps between runs.
KEPT_CACHES = 8


def step_cache(cache: bool | str | os.PathLike) -> "StepCache | None":
    """The process's one ``StepCache`` of that folder: runs share it (and its connection per thread), rather
    than each opening a database that stays open until garbage collection. Only the ``KEPT_CACHES`` folders used
    last are kept, and none that was deleted: a program that gave each run a folder of its own (a temporary one)
    held three open files per folder for good, the deleted ones' disk space with them. A cache let go closes this
    thread's connection now (Python's sqlite3 connections are freed by the cycle collector alone, not when the
    last reference goes), another thread's when it is collected. One this process cannot write (``StepCache.read_only``:
    a read-only home, a full disk) is said once a run: the run reads its stored results and stores nothing."""
    if cache is False or cache is None:
        return None
    if not isinstance(cache, (bool, str, os.PathLike)) or (isinstance(cache, str) and cache.strip().lower() in
                                                            ("", "yes", "no", "true", "false", "on", "off", "1", "0")):
        # (a text meant as a boolean made a folder named "yes" in the working directory)
        raise SpecError(f"cache must be True (the step cache in $TESSERA_HOME/cache), False, or a folder; got "
                        f"{type(cache).__name__} {short_repr(cache)}", field="cache")
    from flows.cache import StepCache
    from flows.store import default_cache_dir

    try:  # "~/cache": the home folder's, as an index path's "~" is (a folder named "~" was made in the working one)
        root = (default_cache_dir() if cache is True else Path(cache).expanduser()).absolute()
    except RuntimeError:  # ~nosuchuser
        raise SpecError(f"cache {os.fspath(cache)!r} starts with a ~user this machine does not know: give another "
                        "folder", field="cache") from None
    with _caches_lock:
        let_go = [_caches.pop(kept) for kept in list(_caches) if kept != root and not kept.is_dir()]
        if root not in _caches:
            _caches[root] = StepCache(root)
        _caches.move_to_end(root)
        while len(_caches) > KEPT_CACHES:
            let_go.append(_caches.popitem(last=False)[1])
        for old in let_go:
            old.close()  # this thread's connection, where runs through this API open theirs
        kept = _caches[root]
    kept.begin_run()  # asked again each run: a folder made writable since, a disk freed
    kept.read_only()  # said before the run
    return kept
